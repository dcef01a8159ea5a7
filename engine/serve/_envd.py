"""envd, the in-sandbox API of E2B, served from outside the sandbox: the process and file system
services (Connect RPC, JSON codec), ``/files`` and ``/health``. Every call becomes a command in
the sandbox's container, run as its user; nothing listens inside the container."""

from __future__ import annotations

import base64
import binascii
import math
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .._errors import SandboxError, SandboxLimitReached
from .._policy import SANDBOX_USER
from .._sandbox import Entry, EntryType, Process, Sandbox
from .._watch import FileEvent, FileEventType, Watcher
from ._connect import ConnectError, end_envelope, envelope, read_message, read_messages
from ._state import state_of

__all__ = ["envd_routes"]

STREAM_MEDIA_TYPE = "application/connect+json"
# envd's default when the client asks for none.
KEEPALIVE_S = 90.0
ENTRY_TYPES = {EntryType.FILE: "FILE_TYPE_FILE", EntryType.DIRECTORY: "FILE_TYPE_DIRECTORY"}
SIGNALS = {"SIGNAL_SIGKILL": signal.SIGKILL, "SIGNAL_SIGTERM": signal.SIGTERM, 9: signal.SIGKILL, 15: signal.SIGTERM}
FILE_ERRORS: dict[type[OSError], tuple[str, int]] = {
    FileNotFoundError: ("not_found", 404),
    FileExistsError: ("already_exists", 409),
    NotADirectoryError: ("invalid_argument", 400),
    IsADirectoryError: ("invalid_argument", 400),
    PermissionError: ("permission_denied", 403),
}

Handler = Callable[[Request, Sandbox, dict[str, Any]], Awaitable[Response]]


def check_user(request: Request) -> None:
    """Only the sandbox's user is offered: ``root`` would need a user namespace per container,
    which the Docker daemon has only daemon-wide (see the README)."""
    header = request.headers.get("authorization", "")
    user = request.query_params.get("username")
    if header.lower().startswith("basic "):
        try:
            user = base64.b64decode(header[6:]).decode().partition(":")[0]
        except (binascii.Error, UnicodeDecodeError):
            raise ConnectError("unauthenticated", "the Authorization header is not Basic user:") from None
    if user not in (None, "", SANDBOX_USER):
        raise ConnectError(
            "permission_denied", f"only the user {SANDBOX_USER!r} exists in an Airlock sandbox, not {user!r}"
        )


def entry_info(entry: Entry) -> dict[str, Any]:
    info: dict[str, Any] = {
        "name": entry.name,
        "type": ENTRY_TYPES.get(entry.type, "FILE_TYPE_UNSPECIFIED"),
        "path": entry.path,
        "size": str(entry.size),
        "mode": entry.mode,
        "permissions": entry.permissions,
        "owner": entry.owner,
        "group": entry.group,
        "modifiedTime": entry.modified.isoformat().replace("+00:00", "Z"),
    }
    if entry.symlink_target is not None:
        info["symlinkTarget"] = entry.symlink_target
    return info


def file_error(exc: OSError) -> ConnectError:
    code, _ = next((v for k, v in FILE_ERRORS.items() if isinstance(exc, k)), ("internal", 500))
    return ConnectError(code, exc.strerror or str(exc))


def rpc(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            check_user(request)
            sandbox = state_of(request).sandbox_for(request)
            message = await read_message(request)
            return await handler(request, sandbox, message)
        except ConnectError as exc:
            return exc.response()
        except OSError as exc:
            return file_error(exc).response()
        except SandboxError as exc:
            return ConnectError("unavailable", str(exc)).response()

    return endpoint


def _selected(sandbox: Sandbox, message: dict[str, Any]) -> Process:
    selector = message.get("process") or {}
    process = None
    if "pid" in selector:
        process = sandbox.processes.get(int(selector["pid"]))
    elif "tag" in selector:
        process = next((p for p in sandbox.processes.values() if p.command.tag == selector["tag"]), None)
    if process is None or process.exit is not None:
        raise ConnectError("not_found", f"no running process matches {selector}")
    return process


def _keepalive_s(request: Request) -> float:
    try:
        return max(1.0, float(request.headers.get("keepalive-ping-interval") or KEEPALIVE_S))
    except ValueError:
        return KEEPALIVE_S


def _deadline_s(request: Request) -> float | None:
    raw = request.headers.get("connect-timeout-ms")
    try:
        return int(raw) / 1000 if raw else None
    except ValueError:
        raise ConnectError("invalid_argument", f"Connect-Timeout-Ms is not a number: {raw!r}") from None


async def _event_stream(request: Request, process: Process, *, start_it: bool) -> AsyncIterator[bytes]:
    """start, data..., then end (or ``deadline_exceeded``, which the SDK turns into its timeout)."""
    interval = _keepalive_s(request)
    with process.subscribe() as output:
        if start_it:
            process.start()
        yield envelope({"event": {"start": {"pid": process.pid}}})
        while True:
            chunk = None
            with anyio.move_on_after(interval):
                try:
                    chunk = await output.receive()
                except anyio.EndOfStream:
                    break
            if chunk is None:
                yield envelope({"event": {"keepalive": {}}})
                continue
            data = base64.b64encode(chunk.data).decode()
            yield envelope({"event": {"data": {chunk.stream: data}}})
    ended = await process.wait()
    if ended.timed_out:
        yield end_envelope(ConnectError("deadline_exceeded", "the command ran past its timeout and was killed"))
        return
    end: dict[str, Any] = {"exited": ended.signal is None, "status": ended.status}
    code = -1 if ended.signal is not None or ended.exit_code is None else ended.exit_code
    if code:
        end["exitCode"] = code
    yield envelope({"event": {"end": end}})
    yield end_envelope()


def _stream(events: AsyncIterator[bytes]) -> Response:
    return StreamingResponse(events, media_type=STREAM_MEDIA_TYPE)


async def start(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    config = message.get("process") or {}
    if message.get("pty"):
        raise ConnectError("unimplemented", "pseudo-terminals are not offered by Airlock sandboxes")
    if not isinstance(config.get("cmd"), str) or not config["cmd"]:
        raise ConnectError("invalid_argument", "process.cmd must name the command to run")
    args = config.get("args") or []
    envs = config.get("envs") or {}
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConnectError("invalid_argument", "process.args must be a list of strings")
    if not isinstance(envs, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in envs.items()):
        raise ConnectError("invalid_argument", "process.envs must map strings to strings")
    process = await sandbox.start(
        [config["cmd"], *args],
        cwd=config.get("cwd") or None,
        env=envs,
        stdin=bool(message.get("stdin", False)),
        time_s=_deadline_s(request),
        tag=message.get("tag"),
    )
    return _stream(_event_stream(request, process, start_it=True))


async def connect(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    return _stream(_event_stream(request, _selected(sandbox, message), start_it=False))


async def list_processes(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    processes = []
    for process in sandbox.running():
        cmd, *args = process.command.argv
        info: dict[str, Any] = {
            "pid": process.pid,
            "config": {"cmd": cmd, "args": args, "envs": dict(process.command.env), "cwd": process.command.cwd},
        }
        if process.command.tag is not None:
            info["tag"] = process.command.tag
        processes.append(info)
    return JSONResponse({"processes": processes})


async def send_signal(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    process = _selected(sandbox, message)
    number = SIGNALS.get(message.get("signal", "SIGNAL_SIGKILL"))
    if number is None:
        raise ConnectError("invalid_argument", f"unknown signal {message.get('signal')!r}")
    await process.signal(number)
    return JSONResponse({})


async def send_input(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    await _selected(sandbox, message).send_stdin(_stdin_bytes(message.get("input")))
    return JSONResponse({})


async def close_stdin(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    await _selected(sandbox, message).close_stdin()
    return JSONResponse({})


def _stdin_bytes(process_input: Any) -> bytes:
    data = process_input.get("stdin") if isinstance(process_input, dict) else None
    if not isinstance(data, str):
        raise ConnectError("invalid_argument", "input.stdin must carry the bytes to send (pty input is not offered)")
    try:
        return base64.b64decode(data, altchars=b"-_" if "-" in data or "_" in data else None)
    except binascii.Error:
        raise ConnectError("invalid_argument", "input.stdin is not base64") from None


async def stream_input(request: Request) -> Response:
    """Client streaming: a start message naming the process, then its input, in order. Like every
    streaming call it answers 200, and a failure in the end-of-stream message."""
    try:
        check_user(request)
        sandbox = state_of(request).sandbox_for(request)
        messages = read_messages(request)
        first = await anext(messages, None)
        if not isinstance(first, dict) or not isinstance(first.get("start"), dict):
            raise ConnectError("invalid_argument", "the first message must be start, naming the process")
        process = _selected(sandbox, first["start"])
        async for message in messages:
            if "data" in message:
                await process.send_stdin(_stdin_bytes((message["data"] or {}).get("input")))
            elif "keepalive" not in message:
                raise ConnectError("invalid_argument", "after start, each message is data or keepalive")
        body = envelope({}) + end_envelope()
    except ConnectError as exc:
        body = end_envelope(exc)
    except SandboxError as exc:
        body = end_envelope(ConnectError("unavailable", str(exc)))
    return Response(body, media_type=STREAM_MEDIA_TYPE)


def _path(message: dict[str, Any], key: str = "path") -> str:
    value = message.get(key)
    if not isinstance(value, str) or not value:
        raise ConnectError("invalid_argument", f"{key} must be a path")
    return value


async def stat(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    return JSONResponse({"entry": entry_info(await sandbox.stat(_path(message)))})


async def make_dir(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    return JSONResponse({"entry": entry_info(await sandbox.make_dir(_path(message)))})


async def move(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    moved = await sandbox.move(_path(message, "source"), _path(message, "destination"))
    return JSONResponse({"entry": entry_info(moved)})


async def list_dir(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    depth = message.get("depth") or 1
    if not isinstance(depth, int) or not 1 <= depth <= 64:
        raise ConnectError("invalid_argument", "depth must be a whole number from 1 to 64")
    entries = await sandbox.list_dir(_path(message), depth)
    return JSONResponse({"entries": [entry_info(entry) for entry in entries]})


async def remove(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    await sandbox.remove(_path(message))
    return JSONResponse({})


EVENT_TYPES = {kind: f"EVENT_TYPE_{kind.name}" for kind in FileEventType}


def _event(event: FileEvent) -> dict[str, Any]:
    return {"name": event.name, "type": EVENT_TYPES[event.type]}


async def _watcher(sandbox: Sandbox, message: dict[str, Any]) -> Watcher:
    if message.get("includeEntry") or message.get("include_entry"):
        raise ConnectError("unimplemented", "events with entries are not offered by Airlock sandboxes")
    try:
        return await sandbox.watch(_path(message), recursive=bool(message.get("recursive")))
    except SandboxLimitReached as exc:
        raise ConnectError("resource_exhausted", str(exc)) from None


async def _watch_stream(request: Request, watcher: Watcher) -> AsyncIterator[bytes]:
    """start, then filesystem events as they come, keepalives in silences; the deadline the client
    set ends it with ``deadline_exceeded``, as envd's does."""
    interval = _keepalive_s(request)
    deadline = _deadline_s(request)
    ends_at = anyio.current_time() + deadline if deadline else math.inf
    try:
        yield envelope({"start": {}})
        while not watcher.ended:
            left = ends_at - anyio.current_time()
            if left <= 0:
                yield end_envelope(ConnectError("deadline_exceeded", "the watch reached its timeout"))
                return
            event = None
            with anyio.move_on_after(min(interval, left)):
                event = await watcher.next_event()
            if event is not None:
                yield envelope({"filesystem": _event(event)})
            elif not watcher.ended and left > interval:
                yield envelope({"keepalive": {}})
        yield end_envelope()
    finally:
        with anyio.CancelScope(shield=True):
            await watcher.stop()


async def watch_dir(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    return _stream(_watch_stream(request, await _watcher(sandbox, message)))


async def create_watcher(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    return JSONResponse({"watcherId": (await _watcher(sandbox, message)).id})


def _watcher_named(sandbox: Sandbox, message: dict[str, Any]) -> Watcher:
    watcher = sandbox.watchers.get(str(message.get("watcherId") or message.get("watcher_id") or ""))
    if watcher is None:
        raise ConnectError("not_found", f"no watcher {message.get('watcherId')!r} in this sandbox")
    return watcher


async def get_watcher_events(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    return JSONResponse({"events": [_event(event) for event in _watcher_named(sandbox, message).drain()]})


async def remove_watcher(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    await _watcher_named(sandbox, message).stop()
    return JSONResponse({})


async def unimplemented(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    raise ConnectError("unimplemented", f"{request.url.path.rsplit('/', 1)[-1]} is not offered by Airlock sandboxes")


# -- plain HTTP -----------------------------------------------------------------------------------


def _http_error(exc: OSError | ConnectError) -> Response:
    if isinstance(exc, ConnectError):
        return JSONResponse({"code": exc.response().status_code, "message": exc.message}, exc.response().status_code)
    _, status = next((v for k, v in FILE_ERRORS.items() if isinstance(exc, k)), ("internal", 500))
    return JSONResponse({"code": status, "message": exc.strerror or str(exc)}, status_code=status)


async def download(request: Request) -> Response:
    try:
        check_user(request)
        sandbox = state_of(request).sandbox_for(request)
        path = request.query_params.get("path")
        if not path:
            raise ConnectError("invalid_argument", "the path query parameter names the file to read")
        opened = sandbox.open_file(path)
        chunks = await opened.__aenter__()
    except (OSError, ConnectError) as exc:
        return _http_error(exc)
    except SandboxError as exc:
        return _http_error(ConnectError("unavailable", str(exc)))

    async def body() -> AsyncIterator[bytes]:
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            with anyio.CancelScope(shield=True):
                await opened.__aexit__(None, None, None)

    name = path.rstrip("/").rsplit("/", 1)[-1]
    return StreamingResponse(
        body(), media_type="application/octet-stream", headers={"Content-Disposition": f'inline; filename="{name}"'}
    )


async def upload(request: Request) -> Response:
    try:
        check_user(request)
        sandbox = state_of(request).sandbox_for(request)
        written: list[Entry] = []
        content_type = request.headers.get("content-type", "")
        if content_type.startswith("multipart/form-data"):
            async with request.form(max_part_size=sandbox.limits.tmpfs_mb << 20) as form:
                for _, part in form.multi_items():
                    if isinstance(part, str):
                        continue
                    path = part.filename or request.query_params.get("path")
                    if not path:
                        raise ConnectError("invalid_argument", "each uploaded file needs a path (its file name)")
                    written.append(await sandbox.write_file(path, await part.read()))
        else:
            path = request.query_params.get("path")
            if not path:
                raise ConnectError("invalid_argument", "the path query parameter names the file to write")
            written.append(await sandbox.write_file(path, request.stream()))
    except (OSError, ConnectError) as exc:
        return _http_error(exc)
    except SandboxError as exc:
        return _http_error(ConnectError("unavailable", str(exc)))
    return JSONResponse([{"name": entry.name, "type": "file", "path": entry.path} for entry in written])


async def health(request: Request) -> Response:
    state_of(request).sandbox_for(request)
    return Response(status_code=204)


def envd_routes() -> list[Route]:
    process = {
        "Start": start,
        "Connect": connect,
        "List": list_processes,
        "SendSignal": send_signal,
        "SendInput": send_input,
        "CloseStdin": close_stdin,
        "Update": unimplemented,
    }
    filesystem = {
        "Stat": stat,
        "MakeDir": make_dir,
        "Move": move,
        "ListDir": list_dir,
        "Remove": remove,
        "WatchDir": watch_dir,
        "CreateWatcher": create_watcher,
        "GetWatcherEvents": get_watcher_events,
        "RemoveWatcher": remove_watcher,
    }
    return [
        *(Route(f"/process.Process/{name}", rpc(handler), methods=["POST"]) for name, handler in process.items()),
        *(
            Route(f"/filesystem.Filesystem/{name}", rpc(handler), methods=["POST"])
            for name, handler in filesystem.items()
        ),
        Route("/process.Process/StreamInput", stream_input, methods=["POST"]),
        Route("/files", download, methods=["GET"]),
        Route("/files", upload, methods=["POST"]),
    ]
