"""``airlock serve``: one ASGI app that the unmodified E2B SDKs take for E2B, and that answers
Piston's and SandboxFusion's APIs.

The control plane, envd and the code interpreter share one listener: envd's requests carry the ``E2b-Sandbox-Id``
header (or the sandbox's access token), which is all the routing there is. Sandboxes live in
the app's engine and are removed when they are killed, expire, or the server stops.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._engine import Engine
from .._errors import EngineError
from .._settings import Settings, default_paused_dir
from ..distributed import RayEngine
from ..judge._batches import Judge
from ..runtime import ContainerUsage
from ._admission import Admission, Dialect
from ._batch import BATCH
from ._code import code_routes
from ._connect import ConnectError
from ._control import E2B_CONTROL
from ._envd import envd_routes
from ._metrics import CONTENT_TYPE_LATEST, ServerMetrics
from ._openapi import document, openapi
from ._piston import PISTON
from ._ports import SANDBOX_PORTS, SandboxPorts
from ._sandbox_fusion import SANDBOX_FUSION
from ._state import SandboxGone, ServeOptions, ServerState, state_of
from ._volumes import E2B_VOLUME_CONTENT, E2B_VOLUMES

__all__ = ["DIALECTS", "ServeOptions", "create_app", "serving"]

# A scrape reads each of the caller's sandboxes' cgroups at once, each for at most this long.
SANDBOX_USAGE_WAIT_S = 2.0


async def health(request: Request) -> Response:
    """The server's own health, or a sandbox's when the request is routed to one."""
    if "e2b-sandbox-id" in request.headers or "x-access-token" in request.headers:
        state_of(request).sandbox_for(request)
        return Response(status_code=204)
    state = state_of(request)
    if state.options.api_keys:
        # Unauthenticated: how busy the other tenants are is none of the caller's business.
        return JSONResponse({"status": "ok"})
    return JSONResponse({"status": "ok", "sandboxes": len(state.engine.sandboxes.list())})


async def healthz(request: Request) -> Response:
    """The process answers (a liveness probe)."""
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    """The server can take work now: its container engine answers and the Python image is there."""
    state = state_of(request)
    engine = state.engine
    try:
        image = await engine.image_for("python")
        present = await engine.runtime.image_id(image) is not None
    except EngineError as exc:
        return JSONResponse({"status": "unavailable", "reason": str(exc)}, status_code=503)
    if not present:
        return JSONResponse({"status": "unavailable", "reason": f"the image {image} is gone"}, status_code=503)
    return JSONResponse({"status": "ready"})


async def metrics(request: Request) -> Response:
    state = state_of(request)
    sandboxes = state.listed(request)
    usages: list[ContainerUsage | None] = [None] * len(sandboxes)

    async def read(index: int) -> None:
        # A sandbox that cannot answer in time (its daemon is busy) is shown without usage, not waited for.
        with anyio.move_on_after(SANDBOX_USAGE_WAIT_S), contextlib.suppress(EngineError):
            usages[index] = await sandboxes[index].usage()

    async with anyio.create_task_group() as reads:
        for index in range(len(sandboxes)):
            reads.start_soon(read, index)
    return Response(state.metrics.render(list(zip(sandboxes, usages, strict=True))), media_type=CONTENT_TYPE_LATEST)


async def sandbox_gone(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SandboxGone)
    body = {"sandboxId": exc.sandbox_id, "message": "The sandbox was not found", "code": 502}
    return JSONResponse(body, status_code=502)


async def connect_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ConnectError)
    return exc.response()


# Every protocol the server speaks, first match wins: envd's and the code interpreter's routes
# (the data plane, guarded by each sandbox's access token) answer every other path.
OPERATIONS = Dialect(
    "operations",
    ("/health", "/readyz", "/openapi.json"),
    (
        Route("/health", health, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ),
    guarded=False,
)
METRICS = Dialect("operations", ("/metrics",), (Route("/metrics", metrics, methods=["GET"]),), guarded=True)
ENVD = Dialect("envd", ("",), (*envd_routes(), *code_routes()), guarded=False)
DIALECTS = (
    SANDBOX_PORTS,
    SANDBOX_FUSION,
    PISTON,
    BATCH,
    E2B_CONTROL,
    E2B_VOLUMES,
    E2B_VOLUME_CONTENT,
    OPERATIONS,
    METRICS,
    ENVD,
)


def serving(settings: Settings) -> Settings:
    """``settings`` as a server uses them: E2B's clients pause to disk (the filesystem mode) and
    expect it to outlive the server, so a server always has a paused directory."""
    if settings.paused_dir is not None:
        return settings
    return settings.model_copy(update={"paused_dir": default_paused_dir()})


def create_app(options: ServeOptions | None = None, settings: Settings | None = None) -> Starlette:
    """The server as an ASGI app; its engine opens with the app's lifespan and closes with it."""
    options = options or ServeOptions()
    settings = serving(settings or Settings())
    opened: list[Engine] = []
    server_metrics = ServerMetrics(lambda: opened)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            # Sandboxes and jobs alike on the runtime the settings name: both runtimes exec into
            # a running container.
            engine = await stack.enter_async_context(Engine(settings, limits=options.limits, observer=server_metrics))
            judge: Judge = engine
            if options.ray_address is not None:
                judge = await stack.enter_async_context(RayEngine(options.ray_address, settings))
            app.state.airlock = ServerState(engine=engine, judge=judge, options=options, metrics=server_metrics)
            opened.append(engine)
            try:
                yield
            finally:
                opened.clear()

    app = Starlette(
        routes=[route for dialect in DIALECTS for route in dialect.routes],
        exception_handlers={SandboxGone: sandbox_gone, ConnectError: connect_error},
        lifespan=lifespan,
    )
    app.state.openapi = document(keyed=bool(options.api_keys))
    # A request for a sandbox's port (by its Host) goes there, whatever its path.
    app.add_middleware(SandboxPorts)
    # The door: a refused request costs nothing past it, and every answer is counted.
    app.add_middleware(Admission, options=options, metrics=server_metrics, dialects=DIALECTS)
    return app
