"""E2B's control plane (REST, JSON): create, connect, list, inspect, time out, pause and kill
sandboxes; take, list and delete snapshots.

Shapes and statuses are the ones the unmodified SDK turns into its own results and exceptions
(404 into ``SandboxNotFoundException`` or ``kill() == False``, 401 into an authentication error,
429 into a retry and then ``RateLimitException``).
"""

from __future__ import annotations

import datetime
import json
import re
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar, get_args

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._errors import EngineError, ImageNotFound, SandboxError, SandboxLimitReached, SandboxNotFound
from .._models import Language
from ..sandboxes._paused import SnapshotRecord
from ..sandboxes._sandbox import Sandbox
from ..sandboxes._sessions import DEFAULT_TIMEOUT_S
from ._admission import Dialect
from ._state import ENVD_VERSION, OWNER_METADATA, PRIVATE_TRAFFIC, Grant, caller_of, state_of

__all__ = ["E2B_CONTROL", "error", "json_body"]

# E2B's own names run in the Python image: it has what E2B's base template offers that a program
# without network needs (a shell, coreutils, Python) and the code interpreter. Every language is
# a template of its own: its image, with its compilers, a shell and Python.
TEMPLATES: dict[str, Language] = {
    "base": "python",
    "code-interpreter-v1": "python",
    **{language: language for language in get_args(Language)},
}
CLIENT_ID = "airlock"
Listed = TypeVar("Listed")
# A sandbox's envVars and metadata, each.
MAX_MAPPING_CHARS = 64 * 1024


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"code": status, "message": message}, status_code=status, headers=headers)


def _rfc3339(moment: datetime.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _listed(sandbox: Sandbox, template: str) -> dict[str, Any]:
    limits = sandbox.limits
    return {
        "templateID": template,
        "sandboxID": sandbox.id,
        "clientID": CLIENT_ID,
        "startedAt": _rfc3339(sandbox.started_at),
        "endAt": _rfc3339(sandbox.end_at),
        "envdVersion": ENVD_VERSION,
        "cpuCount": max(1, round(limits.cpus)),
        "memoryMB": limits.memory_mb,
        "diskSizeMB": limits.tmpfs_mb,
        "state": "paused" if sandbox.paused else "running",
        "metadata": sandbox.metadata,
    }


async def json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    return body


def _timeout(body: dict[str, Any], request: Request, default: float | None) -> float | None:
    value = body.get("timeout", default)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {value!r}")
    return min(float(value), state_of(request).options.max_timeout_s)


def _strings(body: dict[str, Any], key: str) -> dict[str, str]:
    value = body.get(key) or {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"{key} must map strings to strings")
    # The server keeps them as long as the sandbox lives: bounded like everything it keeps.
    if sum(len(k) + len(v) for k, v in value.items()) > MAX_MAPPING_CHARS:
        raise ValueError(f"{key} holds more than {MAX_MAPPING_CHARS} characters")
    return value


def _private_traffic(network: object) -> bool:
    """Whether the sandbox's URLs (``get_host``) need its traffic access token: E2B's
    ``network.allowPublicTraffic`` false. Asking to reach outside is refused: it has no network."""
    if network is None:
        return False
    if not isinstance(network, dict):
        raise ValueError("network must be a JSON object")
    if network.get("allowOut") or network.get("egressProxy"):
        raise ValueError("a sandbox here has no network: allowOut and egressProxy are not offered")
    allowed = network.get("allowPublicTraffic")
    if allowed is not None and not isinstance(allowed, bool):
        raise ValueError("network.allowPublicTraffic must be true or false")
    return allowed is False


def volume_mounts(request: Request, mounts: object) -> dict[str, str]:
    """A create request's ``volumeMounts`` (``[{"name", "path"}]``) as path -> the caller's volume
    id; ``ValueError`` names what is wrong, ``LookupError`` a volume the caller does not have."""
    if mounts is None:
        return {}
    if not isinstance(mounts, list) or not all(
        isinstance(mount, dict) and isinstance(mount.get("name"), str) and isinstance(mount.get("path"), str)
        for mount in mounts
    ):
        raise ValueError('volumeMounts must be a list of {"name": ..., "path": ...}')
    chosen: dict[str, str] = {}
    for mount in mounts:
        volume = state_of(request).volume_of(request, mount["name"])
        if volume is None:
            raise LookupError(f"no volume {mount['name']!r} of yours is kept")
        if mount["path"] in chosen:
            raise ValueError(f"two volumes mount at {mount['path']!r}")
        chosen[mount["path"]] = volume.id
    return chosen


def _sandbox(request: Request) -> tuple[Sandbox, Grant]:
    """The sandbox the path names, if it is the caller's (else ``SandboxNotFound``, as for none)."""
    return state_of(request).owned(request, request.path_params["sandbox_id"])


def _created(sandbox: Sandbox, granted: Grant, template: str) -> dict[str, Any]:
    return {
        "templateID": template,
        "sandboxID": sandbox.id,
        "clientID": CLIENT_ID,
        "envdVersion": ENVD_VERSION,
        # One token for both: envd's requests send the first, the code interpreter's the second.
        "envdAccessToken": granted.token,
        "trafficAccessToken": granted.token,
    }


def _snapshot_named(request: Request, name: str) -> SnapshotRecord | None:
    """The caller's snapshot with this id, or the newest they gave this name."""
    mine = state_of(request).snapshots(request)
    return next((kept for kept in reversed(mine) if name in (kept.id, kept.name)), None)


async def create(request: Request) -> Response:
    try:
        body = await json_body(request)
        template = body.get("templateID") or "base"
        if not isinstance(template, str):
            raise ValueError("templateID must be a string")
        timeout_s = _timeout(body, request, DEFAULT_TIMEOUT_S)
        env, metadata = _strings(body, "envVars"), _strings(body, "metadata")
        if reserved := sorted(key for key in metadata if key.startswith("airlock.")):
            raise ValueError(f"metadata keys that start with 'airlock.' are the server's: {reserved}")
        volumes = volume_mounts(request, body.get("volumeMounts"))
        private = _private_traffic(body.get("network"))
    except ValueError as exc:
        return error(400, str(exc))
    except LookupError as exc:
        return error(404, str(exc))
    state = state_of(request)
    snapshot = _snapshot_named(request, template) if template not in TEMPLATES else None
    operator = None
    if template not in TEMPLATES and snapshot is None:
        try:
            operators = await state.engine.templates()
        except EngineError as exc:
            return error(503, f"the templates cannot be listed: {exc}", headers={"Retry-After": "2"})
        if template not in operators:
            offered = sorted([*TEMPLATES, *operators])
            return error(
                404, f"template {template!r} is not offered, nor a snapshot of yours; Airlock serves {offered}"
            )
        operator = template
    owner = caller_of(request)
    kept = {
        "airlock.template": template,
        **({OWNER_METADATA: owner} if owner is not None else {}),
        **({PRIVATE_TRAFFIC: "true"} if private else {}),
    }
    try:
        with state.making_one(request):
            sandbox = await state.engine.create_sandbox(
                language=TEMPLATES.get(template, "python"),
                template=operator,
                snapshot=snapshot.id if snapshot is not None else None,
                limits=state.options.limits,
                timeout_s=timeout_s or DEFAULT_TIMEOUT_S,
                env=env,
                metadata={**metadata, **kept},
                volumes=volumes,
            )
            granted = state.grant(sandbox, owner)
    except SandboxLimitReached as exc:
        return error(429, str(exc), headers={"Retry-After": "1"})
    except ImageNotFound as exc:
        # Not a passing fault to retry: the operator has not built this template here.
        return error(404, f"template {template!r} is offered but not built on this server: {exc}")
    except SandboxNotFound as exc:  # a snapshot or a volume deleted as the sandbox was made
        return error(404, str(exc))
    except ValueError as exc:  # where its volumes would mount
        return error(400, str(exc))
    except SandboxError as exc:
        return error(409, f"no sandbox could be made of {template!r}: {exc}")
    except EngineError as exc:
        # The container engine is away (a restart): the SDK retries a 503.
        return error(503, f"no sandbox could be made: {exc}", headers={"Retry-After": "2"})
    return JSONResponse(_created(sandbox, granted, template), status_code=201)


async def connect(request: Request) -> Response:
    try:
        body = await json_body(request)
        timeout_s = _timeout(body, request, None)
        sandbox, granted = _sandbox(request)
    except ValueError as exc:
        return error(400, str(exc))
    except SandboxNotFound as exc:
        return error(404, str(exc))
    sandboxes = state_of(request).engine.sandboxes
    try:
        resumed = await sandboxes.resume(sandbox.id)
    except SandboxLimitReached as exc:
        return error(429, str(exc), headers={"Retry-After": "1"})
    except ImageNotFound as exc:
        return error(409, f"the sandbox's template is not built on this server any more: {exc}")
    except SandboxNotFound as exc:
        return error(404, str(exc))
    except SandboxError as exc:
        return error(409, f"the sandbox could not be resumed: {exc}")
    except EngineError as exc:
        return error(503, f"the sandbox could not be resumed: {exc}", headers={"Retry-After": "2"})
    if timeout_s is not None and timeout_s > sandbox.seconds_left:
        await sandboxes.set_timeout(sandbox.id, timeout_s)
    # E2B answers 201 when the connection resumed the sandbox.
    return JSONResponse(_created(sandbox, granted, _template(sandbox)), status_code=201 if resumed else 200)


async def pause(request: Request) -> Response:
    """E2B's memory mode (its default) freezes the sandbox in place; the filesystem mode
    (``"memory": false``) keeps its files on disk and lets go of its container, to start afresh
    with them on resume, also after a restart of the server."""
    try:
        body = await json_body(request)
        keep_memory = body.get("memory", True)
        if not isinstance(keep_memory, bool):
            raise ValueError(f"memory must be true or false, not {keep_memory!r}")
        sandbox, _ = _sandbox(request)
    except ValueError as exc:
        return error(400, str(exc))
    except SandboxNotFound as exc:
        return error(404, str(exc))
    try:
        paused = await state_of(request).engine.sandboxes.pause(sandbox.id, keep_memory=keep_memory)
    except EngineError as exc:
        return _not_done(exc, "the sandbox could not be paused")
    if not paused:
        return error(409, f"sandbox {sandbox.id!r} is paused already")
    return Response(status_code=204)


# A snapshot's name: E2B's are namespace/alias:tag. Never a template's or a language's, which it
# would hide.
SNAPSHOT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")


def _snapshot_info(kept: SnapshotRecord) -> dict[str, Any]:
    return {"snapshotID": kept.id, "names": [kept.name] if kept.name is not None else []}


async def take_snapshot(request: Request) -> Response:
    """A snapshot of the sandbox's files, every process stopped while they are taken; the sandbox
    goes on. Memory is never kept: ``"memory": true`` (E2B's default) is taken as the filesystem
    mode, as its sandboxes start afresh with the files."""
    state = state_of(request)
    try:
        body = await json_body(request)
        name = body.get("name")
        if name is not None and (not isinstance(name, str) or not SNAPSHOT_NAME.fullmatch(name)):
            raise ValueError(f"name must be 1 to 128 letters, digits or ._:/- , not {name!r}")
        if name is not None and (name in TEMPLATES or name in await state.engine.templates()):
            raise ValueError(f"{name!r} names a template; give the snapshot a name of its own")
        if not isinstance(body.get("memory", True), bool):
            raise ValueError(f"memory must be true or false, not {body['memory']!r}")
        sandbox, granted = _sandbox(request)
    except ValueError as exc:
        return error(400, str(exc))
    except SandboxNotFound as exc:
        return error(404, str(exc))
    except EngineError as exc:
        return error(503, f"the templates cannot be listed: {exc}", headers={"Retry-After": "2"})
    owner = {OWNER_METADATA: granted.owner} if granted.owner is not None else {}
    try:
        with state.taking_one(request):
            kept = await state.engine.sandboxes.snapshot(sandbox.id, name=name, metadata=owner)
    except EngineError as exc:
        return _not_done(exc, "no snapshot was taken")
    return JSONResponse(_snapshot_info(kept), status_code=201)


async def list_snapshots(request: Request) -> Response:
    """The caller's snapshots (of one sandbox, ``sandboxID``; with one name, ``name``), oldest
    first, a page at a time as ``list_sandboxes`` pages."""
    query = request.query_params
    try:
        limit = _page_size(request)
    except ValueError as exc:
        return error(400, str(exc))
    matching = [
        kept
        for kept in state_of(request).snapshots(request)
        if query.get("sandboxID") in (None, kept.source) and query.get("name") in (None, kept.name)
    ]
    page, token = _page(matching, lambda kept: f"{kept.created_at.isoformat()}|{kept.id}", limit, query, False)
    return JSONResponse([_snapshot_info(kept) for kept in page], headers=token)


async def delete_snapshot(request: Request) -> Response:
    """E2B deletes a snapshot as a template. The operator's templates are not deleted over the API."""
    state = state_of(request)
    kept = _snapshot_named(request, request.path_params["template_id"])
    if kept is None or not await state.engine.sandboxes.delete_snapshot(kept.id):
        return error(404, f"no snapshot {request.path_params['template_id']!r} of yours is kept")
    return Response(status_code=204)


def _not_done(exc: EngineError, what: str) -> JSONResponse:
    """What a pause or a snapshot that failed answers: the caller's limit (429), a sandbox gone
    meanwhile (404), the sandbox's state (409), anything else the server's (500)."""
    if isinstance(exc, SandboxLimitReached):
        return error(429, str(exc), headers={"Retry-After": "1"})
    if isinstance(exc, SandboxNotFound):
        return error(404, str(exc))
    return error(409 if isinstance(exc, SandboxError) else 500, f"{what}: {exc}")


def _template(sandbox: Sandbox) -> str:
    return sandbox.metadata.get("airlock.template", "base")


def _public_metadata(sandbox: Sandbox) -> dict[str, str]:
    return {k: v for k, v in sandbox.metadata.items() if not k.startswith("airlock.")}


async def kill(request: Request) -> Response:
    state = state_of(request)
    try:
        sandbox, _ = _sandbox(request)
    except SandboxNotFound as exc:
        return error(404, str(exc))
    if not await state.engine.sandboxes.kill(sandbox.id):
        return error(404, f"sandbox {sandbox.id!r} is not alive")
    state.forget(sandbox.id)
    return Response(status_code=204)


async def set_timeout(request: Request) -> Response:
    try:
        body = await json_body(request)
        timeout_s = _timeout(body, request, None)
        if timeout_s is None:
            raise ValueError("timeout is required")
        sandbox, _ = _sandbox(request)
    except ValueError as exc:
        return error(400, str(exc))
    except SandboxNotFound as exc:
        return error(404, str(exc))
    await state_of(request).engine.sandboxes.set_timeout(sandbox.id, timeout_s)
    return Response(status_code=204)


async def info(request: Request) -> Response:
    try:
        sandbox, granted = _sandbox(request)
    except SandboxNotFound as exc:
        return error(404, str(exc))
    detail = _listed(sandbox, _template(sandbox))
    detail["metadata"] = _public_metadata(sandbox)
    detail["envdAccessToken"] = detail["trafficAccessToken"] = granted.token
    return JSONResponse(detail)


# E2B's default page; a client asks for another with ``limit``.
PAGE = 100
MAX_PAGE = 1000


def _page_key(sandbox: Sandbox) -> str:
    return f"{sandbox.started_at.isoformat()}|{sandbox.id}"


async def list_sandboxes(request: Request) -> Response:
    """The caller's sandboxes that match the query, a page at a time as E2B pages them: ``limit``
    per page, and ``x-next-token`` naming where the next page starts (the sandboxes are ordered
    by start, so one that ends between pages moves nothing)."""
    query = request.query_params
    wanted: dict[str, str] = {}
    for raw in query.getlist("metadata"):
        # The SDK encodes k=v&k2=v2 once more inside the query string.
        for key, value in urllib.parse.parse_qsl(raw, keep_blank_values=True):
            wanted[key] = value
    states = {s for raw in query.getlist("state") for s in raw.split(",") if s}
    try:
        limit = _page_size(request)
    except ValueError as exc:
        return error(400, str(exc))
    try:
        after = datetime.datetime.fromisoformat(query["startedAfter"]) if "startedAfter" in query else None
    except ValueError:
        return error(400, "startedAfter must be an RFC 3339 time")
    if after is not None and after.tzinfo is None:
        after = after.replace(tzinfo=datetime.UTC)
    matching = [
        sandbox
        for sandbox in state_of(request).listed(request)
        if (not states or ("paused" if sandbox.paused else "running") in states)
        and all(_public_metadata(sandbox).get(k) == v for k, v in wanted.items())
        and query.get("template") in (None, _template(sandbox))
        and (after is None or sandbox.started_at >= after)
    ]
    page, headers = _page(matching, _page_key, limit, query, query.get("order") == "desc")
    listed = [{**_listed(sandbox, _template(sandbox)), "metadata": _public_metadata(sandbox)} for sandbox in page]
    return JSONResponse(listed, headers=headers)


def _page_size(request: Request) -> int:
    text = request.query_params.get("limit", str(PAGE))
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_PAGE:
        raise ValueError(f"limit must be a whole number from 1 to {MAX_PAGE}")
    return int(text)


def _page(
    items: list[Listed], key: Callable[[Listed], str], limit: int, query: QueryParams, descending: bool
) -> tuple[list[Listed], dict[str, str]]:
    """One page of ``items`` in ``key``'s order, from the ``nextToken`` the query names (a key: an
    item that goes between pages moves nothing); with the header that names the next page's."""
    token = query.get("nextToken") or ""
    ordered = sorted(items, key=key, reverse=descending)
    if token:
        ordered = [item for item in ordered if (key(item) <= token if descending else key(item) >= token)]
    rest = ordered[limit:]
    return ordered[:limit], ({"x-next-token": key(rest[0])} if rest else {})


def _unix_time(request: Request, name: str) -> datetime.datetime | None:
    text = request.query_params.get(name)
    if text is None:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 12:
        raise ValueError(f"{name} must be a time in whole seconds since the epoch")
    return datetime.datetime.fromtimestamp(int(text), datetime.UTC)


async def metrics(request: Request) -> Response:
    """A new sample, with the samples taken before it, between ``start`` and ``end`` (seconds since
    the epoch, both included). A sandbox is sampled when someone asks, so the series holds the
    moments asked at; each sample's CPU share covers the time since the one before."""
    try:
        start, end = _unix_time(request, "start"), _unix_time(request, "end")
        sandbox, _ = _sandbox(request)
    except ValueError as exc:
        return error(400, str(exc))
    except SandboxNotFound as exc:
        return error(404, str(exc))
    try:
        await sandbox.metrics()
    except EngineError as exc:
        return error(500, f"the sandbox could not be measured: {exc}")
    return JSONResponse(
        [
            {
                "timestamp": _rfc3339(sample.timestamp),
                "timestampUnix": int(sample.timestamp.timestamp()),
                "cpuCount": sample.cpu_count,
                "cpuUsedPct": sample.cpu_used_pct,
                "memUsed": sample.mem_used,
                "memTotal": sample.mem_total,
                "memCache": sample.mem_cache,
                "diskUsed": sample.disk_used,
                "diskTotal": sample.disk_total,
            }
            for sample in sandbox.metrics_samples
            if (start is None or sample.timestamp >= start)
            and (end is None or sample.timestamp < end + datetime.timedelta(seconds=1))
        ]
    )


E2B_CONTROL = Dialect(
    "e2b",
    ("/sandboxes", "/v2/sandboxes", "/snapshots", "/templates/"),
    (
        Route("/sandboxes", create, methods=["POST"]),
        Route("/v2/sandboxes", create, methods=["POST"]),
        Route("/sandboxes", list_sandboxes, methods=["GET"]),
        Route("/v2/sandboxes", list_sandboxes, methods=["GET"]),
        Route("/sandboxes/{sandbox_id}", info, methods=["GET"]),
        Route("/sandboxes/{sandbox_id}", kill, methods=["DELETE"]),
        Route("/sandboxes/{sandbox_id}/timeout", set_timeout, methods=["POST"]),
        Route("/sandboxes/{sandbox_id}/connect", connect, methods=["POST"]),
        Route("/v2/sandboxes/{sandbox_id}/connect", connect, methods=["POST"]),
        Route("/sandboxes/{sandbox_id}/resume", connect, methods=["POST"]),
        Route("/sandboxes/{sandbox_id}/pause", pause, methods=["POST"]),
        Route("/sandboxes/{sandbox_id}/metrics", metrics, methods=["GET"]),
        Route("/sandboxes/{sandbox_id}/snapshots", take_snapshot, methods=["POST"]),
        Route("/snapshots", list_snapshots, methods=["GET"]),
        Route("/templates/{template_id:path}", delete_snapshot, methods=["DELETE"]),
    ),
    guarded=True,
)
