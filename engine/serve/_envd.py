"""envd, the in-sandbox API of E2B, served from outside the sandbox: the process and file system
services (Connect RPC, JSON codec), ``/files`` and ``/health``. Every call becomes a command in
the sandbox's container, run as its user; nothing listens inside the container."""

from __future__ import annotations

import base64
import binascii
import math
import signal
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .._errors import SandboxError, SandboxLimitReached
from .._models import safe_text
from ..e2b import WIRE_ENTRY_TYPES, WIRE_EVENT_TYPES
from ..runtime._policy import SANDBOX_ROOT, SANDBOX_USER
from ..sandboxes._sandbox import Entry, Process, Sandbox
from ..sandboxes._watch import FileEvent, Watcher
from ._connect import ConnectError, end_envelope, envelope, read_message, read_messages
from ._envd_wire import (
    InputRequest,
    ListDirRequest,
    MoveRequest,
    PathRequest,
    ProcessInput,
    ProcessSelector,
    SelectRequest,
    SignalRequest,
    StartRequest,
    StreamInputMessage,
    UpdateRequest,
    WatcherRequest,
    WatchRequest,
    parsed,
)
from ._state import state_of

__all__ = ["envd_routes"]

STREAM_MEDIA_TYPE = "application/connect+json"
# envd's default when the client asks for none.
KEEPALIVE_S = 90.0
SIGNALS = {"SIGNAL_SIGKILL": signal.SIGKILL, "SIGNAL_SIGTERM": signal.SIGTERM, 9: signal.SIGKILL, 15: signal.SIGTERM}
FILE_ERRORS: dict[type[OSError], tuple[str, int]] = {
    FileNotFoundError: ("not_found", 404),
    FileExistsError: ("already_exists", 409),
    NotADirectoryError: ("invalid_argument", 400),
    IsADirectoryError: ("invalid_argument", 400),
    PermissionError: ("permission_denied", 403),
}

Handler = Callable[[Request, Sandbox, dict[str, Any]], Awaitable[Response]]


def user_of(request: Request) -> str:
    """Who the call runs as: the Basic user, else the ``username`` parameter, else the sandbox's
    user (what envd does when the SDK names none)."""
    header = request.headers.get("authorization", "")
    user = request.query_params.get("username")
    if header.lower().startswith("basic "):
        try:
            user = base64.b64decode(header[6:]).decode().partition(":")[0]
        except (binascii.Error, UnicodeDecodeError):
            raise ConnectError("unauthenticated", "the Authorization header is not Basic user:") from None
    return user or SANDBOX_USER


def sandbox_and_user(request: Request) -> tuple[Sandbox, str]:
    """The sandbox the call is for, and one of its users to run it as (root only where the
    runtime gives each sandbox a user namespace: docs/serve.md, Users)."""
    user = user_of(request)
    sandbox = state_of(request).sandbox_for(request)
    if user not in sandbox.users:
        remedy = " (a sandbox has a root of its own under airlock serve --runtime oci)" if user == SANDBOX_ROOT else ""
        users = ", ".join(map(repr, sandbox.users))
        raise ConnectError("permission_denied", f"the users of this sandbox are {users}, not {user!r}{remedy}")
    return sandbox, user


def entry_info(entry: Entry) -> dict[str, Any]:
    """The entry as envd's ``EntryInfo``. Names are any bytes the sandbox's user chose: bytes that
    are not UTF-8 become U+FFFD, as envd (Go's JSON encoder) writes them."""
    info: dict[str, Any] = {
        "name": safe_text(entry.name),
        "type": WIRE_ENTRY_TYPES.get(entry.type, "FILE_TYPE_UNSPECIFIED"),
        "path": safe_text(entry.path),
        "size": str(entry.size),
        "mode": entry.mode,
        "permissions": entry.permissions,
        "owner": safe_text(entry.owner),
        "group": safe_text(entry.group),
        "modifiedTime": entry.modified.isoformat().replace("+00:00", "Z"),
    }
    if entry.symlink_target is not None:
        info["symlinkTarget"] = safe_text(entry.symlink_target)
    return info


def file_error(exc: OSError) -> ConnectError:
    code, _ = next((v for k, v in FILE_ERRORS.items() if isinstance(exc, k)), ("internal", 500))
    return ConnectError(code, exc.strerror or str(exc))


def rpc(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            sandbox, _ = sandbox_and_user(request)
            message = await read_message(request)
            return await handler(request, sandbox, message)
        except ConnectError as exc:
            return exc.response()
        except OSError as exc:
            return file_error(exc).response()
        except SandboxError as exc:
            return ConnectError("unavailable", str(exc)).response()

    return endpoint


def _selected(sandbox: Sandbox, selector: ProcessSelector) -> Process:
    process = None
    if selector.pid is not None:
        process = sandbox.processes.get(selector.pid)
    elif selector.tag is not None:
        process = next((p for p in sandbox.processes.values() if p.command.tag == selector.tag), None)
    if process is None or process.exit is not None:
        shown = selector.model_dump(exclude_none=True)
        raise ConnectError("not_found", f"no running process matches {shown}")
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
            yield envelope({"event": {"data": {"pty" if process.command.terminal else chunk.stream: data}}})
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
    asked = parsed(StartRequest, message)
    config = asked.process
    process = await sandbox.start(
        [config.cmd, *config.args],
        cwd=config.cwd or None,
        env=config.envs,
        stdin=asked.stdin or asked.pty is not None,  # a terminal takes what is typed at it
        time_s=_deadline_s(request),
        tag=asked.tag,
        terminal=asked.pty.terminal() if asked.pty is not None else None,
        user=user_of(request),
    )
    return _stream(_event_stream(request, process, start_it=True))


async def connect(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    selected = _selected(sandbox, parsed(SelectRequest, message).process)
    return _stream(_event_stream(request, selected, start_it=False))


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
    asked = parsed(SignalRequest, message)
    number = SIGNALS.get(asked.signal)
    if number is None:
        raise ConnectError("invalid_argument", f"unknown signal {asked.signal!r}")
    await _selected(sandbox, asked.process).signal(number)
    return JSONResponse({})


async def send_input(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    asked = parsed(InputRequest, message)
    await _selected(sandbox, asked.process).send_stdin(_stdin_bytes(asked.input))
    return JSONResponse({})


async def update(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    asked = parsed(UpdateRequest, message)
    if asked.pty is None:
        raise ConnectError("invalid_argument", "pty: a terminal's new size is the one update there is")
    process = _selected(sandbox, asked.process)
    if process.command.terminal is None:
        raise ConnectError("failed_precondition", f"process {process.pid} was not started on a terminal")
    await process.resize(asked.pty.terminal())
    return JSONResponse({})


async def close_stdin(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    await _selected(sandbox, parsed(SelectRequest, message).process).close_stdin()
    return JSONResponse({})


def _stdin_bytes(process_input: ProcessInput) -> bytes:
    data = process_input.stdin if process_input.stdin is not None else process_input.pty
    if data is None:
        raise ConnectError("invalid_argument", "input must carry the bytes to send, in stdin or pty")
    try:
        return base64.b64decode(data, altchars=b"-_" if "-" in data or "_" in data else None)
    except binascii.Error:
        raise ConnectError("invalid_argument", "input.stdin is not base64") from None


async def stream_input(request: Request) -> Response:
    """Client streaming: a start message naming the process, then its input, in order. Like every
    streaming call it answers 200, and a failure in the end-of-stream message."""
    try:
        sandbox, _ = sandbox_and_user(request)
        messages = read_messages(request)
        first = await anext(messages, None)
        opening = parsed(StreamInputMessage, first or {})
        if opening.start is None:
            raise ConnectError("invalid_argument", "the first message must be start, naming the process")
        process = _selected(sandbox, opening.start.process)
        async for message in messages:
            following = parsed(StreamInputMessage, message)
            if following.data is not None:
                await process.send_stdin(_stdin_bytes(following.data.input))
            elif following.keepalive is None:
                raise ConnectError("invalid_argument", "after start, each message is data or keepalive")
        body = envelope({}) + end_envelope()
    except ConnectError as exc:
        body = end_envelope(exc)
    except SandboxError as exc:
        body = end_envelope(ConnectError("unavailable", str(exc)))
    return Response(body, media_type=STREAM_MEDIA_TYPE)


async def stat(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    entry = await sandbox.stat(parsed(PathRequest, message).path, user=user_of(request))
    return JSONResponse({"entry": entry_info(entry)})


async def make_dir(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    made = await sandbox.make_dir(parsed(PathRequest, message).path, user=user_of(request))
    return JSONResponse({"entry": entry_info(made)})


async def move(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    asked = parsed(MoveRequest, message)
    moved = await sandbox.move(asked.source, asked.destination, user=user_of(request))
    return JSONResponse({"entry": entry_info(moved)})


async def list_dir(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    asked = parsed(ListDirRequest, message)
    entries = await sandbox.list_dir(asked.path, asked.depth or 1, user=user_of(request))
    return JSONResponse({"entries": [entry_info(entry) for entry in entries]})


async def remove(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    await sandbox.remove(parsed(PathRequest, message).path, user=user_of(request))
    return JSONResponse({})


def _event(event: FileEvent) -> dict[str, Any]:
    return {"name": event.name, "type": WIRE_EVENT_TYPES[event.type]}


async def _watcher(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Watcher:
    asked = parsed(WatchRequest, message)
    if asked.include_entry:
        raise ConnectError("unimplemented", "events with entries are not offered by Airlock sandboxes")
    try:
        return await sandbox.watch(asked.path, recursive=asked.recursive, user=user_of(request))
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
    return _stream(_watch_stream(request, await _watcher(request, sandbox, message)))


async def create_watcher(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    return JSONResponse({"watcherId": (await _watcher(request, sandbox, message)).id})


def _watcher_named(sandbox: Sandbox, message: dict[str, Any]) -> Watcher:
    watcher_id = parsed(WatcherRequest, message).watcher_id
    watcher = sandbox.watchers.get(watcher_id)
    if watcher is None:
        raise ConnectError("not_found", f"no watcher {watcher_id!r} in this sandbox")
    return watcher


async def get_watcher_events(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    return JSONResponse({"events": [_event(event) for event in _watcher_named(sandbox, message).drain()]})


async def remove_watcher(request: Request, sandbox: Sandbox, message: dict[str, Any]) -> Response:
    await _watcher_named(sandbox, message).stop()
    return JSONResponse({})


# -- plain HTTP -----------------------------------------------------------------------------------


def _http_error(exc: OSError | ConnectError) -> Response:
    if isinstance(exc, ConnectError):
        return JSONResponse({"code": exc.response().status_code, "message": exc.message}, exc.response().status_code)
    _, status = next((v for k, v in FILE_ERRORS.items() if isinstance(exc, k)), ("internal", 500))
    return JSONResponse({"code": status, "message": exc.strerror or str(exc)}, status_code=status)


def _query_path(request: Request, verb: str) -> str:
    path = request.query_params.get("path")
    if not path:
        raise ConnectError("invalid_argument", f"the path query parameter names the file to {verb}")
    return parsed(PathRequest, {"path": path}).path


async def download(request: Request) -> Response:
    try:
        sandbox, user = sandbox_and_user(request)
        path = _query_path(request, "read")
        opened = sandbox.open_file(path, user=user)
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

    return StreamingResponse(
        body(), media_type="application/octet-stream", headers={"Content-Disposition": _disposition(path)}
    )


def _disposition(path: str) -> str:
    """``inline`` with the file's name, as envd (Go's ``mime.FormatMediaType``) writes it: quoted
    when it is plain ASCII, else percent-encoded UTF-8 (a name may hold any character, quotes
    and line breaks included, none of which may reach a header as they are)."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if name.isascii() and name.isprintable() and '"' not in name and "\\" not in name:
        return f'inline; filename="{name}"'
    return "inline; filename*=utf-8''" + urllib.parse.quote(name.encode("utf-8", "surrogateescape"), safe="")


async def upload(request: Request) -> Response:
    try:
        sandbox, user = sandbox_and_user(request)
        written: list[Entry] = []
        content_type = request.headers.get("content-type", "")
        if content_type.startswith("multipart/form-data"):
            async with request.form(max_part_size=sandbox.limits.tmpfs_mb << 20) as form:
                for _, part in form.multi_items():
                    if isinstance(part, str):
                        continue
                    path = parsed(PathRequest, {"path": part.filename or _query_path(request, "write")}).path
                    written.append(await sandbox.write_file(path, await part.read(), user=user))
        else:
            written.append(await sandbox.write_file(_query_path(request, "write"), request.stream(), user=user))
    except (OSError, ConnectError) as exc:
        return _http_error(exc)
    except SandboxError as exc:
        return _http_error(ConnectError("unavailable", str(exc)))
    except ClientDisconnect:
        # Nobody is left to answer; the half-written file stays, as a broken-off write leaves it.
        return Response(status_code=400)
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
        "Update": update,
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
