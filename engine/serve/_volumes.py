"""E2B's volumes: the control plane's ``/volumes`` (create, list, inspect, delete, by API key) and
the volume content API's ``/volumecontent/ID/...`` (stat, list, read, write, make folders, remove,
change owner and mode), which E2B's SDK reaches with the volume's own token as a bearer token.

A volume belongs to the key that created it: another key does not see it listed, gets 404 for it
and cannot mount it. Its token, told only to its owner, is what reaches its files; a wrong token
and a volume that does not exist get the same 401.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .._errors import EngineError, SandboxError, SandboxLimitReached
from ..sandboxes._volumes import NAME_PATTERN, EntryStat, VolumeFull, VolumeNotFound, VolumeRecord
from ._admission import Dialect
from ._control import error, json_body
from ._state import OWNER_METADATA, caller_of, state_of

__all__ = ["E2B_VOLUMES", "E2B_VOLUME_CONTENT"]


def _info(volume: VolumeRecord, *, with_token: bool) -> dict[str, Any]:
    return {"volumeID": volume.id, "name": volume.name, **({"token": volume.token} if with_token else {})}


async def create_volume(request: Request) -> Response:
    try:
        name = (await json_body(request)).get("name")
        if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name):
            raise ValueError(f"name must be 1 to 63 letters, digits, '.', '_' or '-' (not first), not {name!r}")
    except ValueError as exc:
        return error(400, str(exc))
    state = state_of(request)
    if state.volume_of(request, name) is not None:
        return error(409, f"you have a volume named {name!r} already")
    owner = caller_of(request)
    try:
        with state.making_volume(request):
            volume = await state.engine.volumes.create(name, {OWNER_METADATA: owner} if owner is not None else {})
    except SandboxLimitReached as exc:
        return error(429, f"no volume was made: {exc}")
    except EngineError as exc:
        return error(503, f"no volume was made: {exc}", headers={"Retry-After": "2"})
    return JSONResponse(_info(volume, with_token=True), status_code=201)


async def list_volumes(request: Request) -> Response:
    return JSONResponse([_info(kept, with_token=False) for kept in state_of(request).volumes(request)])


async def get_volume(request: Request) -> Response:
    volume = state_of(request).volume_of(request, request.path_params["volume_id"])
    if volume is None:
        return error(404, f"no volume {request.path_params['volume_id']!r} of yours is kept")
    return JSONResponse(_info(volume, with_token=True))


async def delete_volume(request: Request) -> Response:
    volume = state_of(request).volume_of(request, request.path_params["volume_id"])
    if volume is None:
        return error(404, f"no volume {request.path_params['volume_id']!r} of yours is kept")
    try:
        await state_of(request).engine.volumes.delete(volume.id)
    except SandboxError as exc:
        return error(409, str(exc))
    return Response(status_code=204)


E2B_VOLUMES = Dialect(
    "e2b",
    ("/volumes",),
    (
        Route("/volumes", create_volume, methods=["POST"]),
        Route("/volumes", list_volumes, methods=["GET"]),
        Route("/volumes/{volume_id}", get_volume, methods=["GET"]),
        Route("/volumes/{volume_id}", delete_volume, methods=["DELETE"]),
    ),
    guarded=True,
)


# -- the volume content API --------------------------------------------------------------------


def _entry(stat: EntryStat) -> dict[str, Any]:
    return stat.model_dump(mode="json", exclude_none=True)


def _volume(request: Request) -> VolumeRecord:
    """The volume the path names, if the request carries its token; else ``PermissionError``."""
    given = request.headers.get("authorization", "")
    scheme, _, token = given.partition(" ")
    try:
        volume = state_of(request).engine.volumes.get(request.path_params["volume_id"])
    except VolumeNotFound:
        volume = None
    if volume is None or scheme.lower() != "bearer" or not secrets.compare_digest(volume.token, token.strip()):
        raise PermissionError("the volume's token is required (Authorization: Bearer TOKEN)")
    return volume


def _number(request: Request, name: str) -> int | None:
    text = request.query_params.get(name)
    if text is None or text == "":
        return None
    try:
        return int(text, 0)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {text!r}") from None


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "").lower() in ("true", "1")


def _path(request: Request) -> str:
    path = request.query_params.get("path")
    if path is None:
        raise ValueError("the query needs a path")
    return path


async def _answer(request: Request, work: Callable[[VolumeRecord], Awaitable[Response]]) -> Response:
    """Run one content operation, its failures answered as E2B's volume API answers them."""
    try:
        volume = _volume(request)
        return await work(volume)
    except PermissionError as exc:
        return error(401, str(exc))
    except VolumeNotFound as exc:
        return error(404, str(exc))
    except FileExistsError:
        return error(409, f"{request.query_params.get('path')!r} exists already")
    except VolumeFull as exc:
        return error(507, str(exc))
    except ValueError as exc:
        return error(400, str(exc))
    except SandboxError as exc:
        return error(500, str(exc))


async def stat_path(request: Request) -> Response:
    async def work(volume: VolumeRecord) -> Response:
        return JSONResponse(_entry(await state_of(request).engine.volumes.stat(volume.id, _path(request))))

    return await _answer(request, work)


async def list_dir(request: Request) -> Response:
    async def work(volume: VolumeRecord) -> Response:
        depth = _number(request, "depth") or 1
        found = await state_of(request).engine.volumes.list_dir(volume.id, _path(request), depth)
        return JSONResponse([_entry(entry) for entry in found])

    return await _answer(request, work)


async def make_dir(request: Request) -> Response:
    async def work(volume: VolumeRecord) -> Response:
        made = await state_of(request).engine.volumes.make_dir(
            volume.id, _path(request), **_owner(request, 0o755), parents=_flag(request, "force")
        )
        return JSONResponse(_entry(made), status_code=201)

    return await _answer(request, work)


async def read_file(request: Request) -> Response:
    async def work(volume: VolumeRecord) -> Response:
        chunks = await state_of(request).engine.volumes.read(volume.id, _path(request))
        return StreamingResponse(chunks, media_type="application/octet-stream")

    return await _answer(request, work)


async def write_file(request: Request) -> Response:
    async def work(volume: VolumeRecord) -> Response:
        async def body() -> AsyncIterator[bytes]:
            async for chunk in request.stream():
                if chunk:
                    yield chunk

        written = await state_of(request).engine.volumes.write(
            volume.id, _path(request), body(), **_owner(request, 0o644)
        )
        return JSONResponse(_entry(written), status_code=201)

    return await _answer(request, work)


async def remove_path(request: Request) -> Response:
    async def work(volume: VolumeRecord) -> Response:
        await state_of(request).engine.volumes.remove(volume.id, _path(request))
        return Response(status_code=204)

    return await _answer(request, work)


async def change_path(request: Request) -> Response:
    async def work(volume: VolumeRecord) -> Response:
        body = await json_body(request)
        changes = {name: body.get(name) for name in ("uid", "gid", "mode")}
        if not all(
            value is None or (isinstance(value, int) and not isinstance(value, bool)) for value in changes.values()
        ):
            raise ValueError("uid, gid and mode must be whole numbers")
        changed = await state_of(request).engine.volumes.change(volume.id, _path(request), **changes)
        return JSONResponse(_entry(changed))

    return await _answer(request, work)


def _owner(request: Request, mode: int) -> dict[str, int]:
    """The uid, gid and mode a new entry gets: the query's, else the sandboxes' user's and ``mode``."""
    given = {name: _number(request, name) for name in ("uid", "gid", "mode")}
    defaults = {"uid": 1000, "gid": 1000, "mode": mode}
    return {name: defaults[name] if value is None else value for name, value in given.items()}


E2B_VOLUME_CONTENT = Dialect(
    "e2b",
    ("/volumecontent/",),
    (
        Route("/volumecontent/{volume_id}/path", stat_path, methods=["GET"]),
        Route("/volumecontent/{volume_id}/path", remove_path, methods=["DELETE"]),
        Route("/volumecontent/{volume_id}/path", change_path, methods=["PATCH"]),
        Route("/volumecontent/{volume_id}/dir", list_dir, methods=["GET"]),
        Route("/volumecontent/{volume_id}/dir", make_dir, methods=["POST"]),
        Route("/volumecontent/{volume_id}/file", read_file, methods=["GET"]),
        Route("/volumecontent/{volume_id}/file", write_file, methods=["PUT"]),
    ),
    guarded=False,
)
