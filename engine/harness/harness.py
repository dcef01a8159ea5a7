"""The harness's entry point: the container's PID 1 (standard library only).

It makes itself not dumpable before it reads anything: a program running as the same uid can
then neither read its memory, nor open ``/proc/1/fd/1``, nor signal it (the kernel drops
signals to a namespace's init that it has no handler for). It keeps a private copy of stdout
for its report, reads one request from stdin, hands the tests to a runner under the
supervisor, and reports what it observed as frames (see ``protocol``). Expected outputs are
never sent here; in assert mode the trusted test code runs in this process.
"""

from __future__ import annotations

import os

from ._lean import loads
from ._typing import TYPE_CHECKING
from .conversation import HostFeed
from .lockdown import make_undumpable
from .processes import ChildWakeup
from .protocol import MAX_REQUEST_BYTES, MODES, PROTOCOL_VERSION, RUNNERS
from .runners import runner_for
from .runners.python import Worker
from .supervisor import Frames, Supervisor
from .workspace import Workspace

if TYPE_CHECKING:
    from typing import Any


class RequestError(ValueError):
    """The request document is unusable."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise RequestError(message)


def parse_request(raw: bytes) -> dict[str, Any]:
    try:
        request: dict[str, Any] = loads(raw)
    except (ValueError, RecursionError) as exc:
        raise RequestError(f"request is not JSON: {exc}") from exc
    _require(isinstance(request, dict), "request must be a JSON object")
    _require(
        request.get("protocol") == PROTOCOL_VERSION,
        f"protocol {request.get('protocol')!r} is not supported (this harness speaks {PROTOCOL_VERSION})",
    )
    _require(request.get("mode") in MODES, f"mode must be one of {MODES}")
    _require(request.get("runner", "python") in RUNNERS, f"runner must be one of {RUNNERS}")
    _require(isinstance(request.get("code"), str), "code must be a string")
    _require(isinstance(request.get("tests"), list), "tests must be a list")
    _require(request["mode"] != "call" or isinstance(request.get("entry"), str), "call mode needs an entry name")
    _require(
        request.get("interactive") in (None, False)
        or (request["mode"] == "script" and request.get("interactive") is True),
        "interactive must be true or false, and only script tests are interactive",
    )
    _require(request.get("entry") is None or isinstance(request["entry"], str), "entry must be a string")
    _require(isinstance(request.get("shared_process", False), bool), "shared_process must be true or false")
    shareable = request.get("runner", "python") == "python" and request["mode"] != "prime"
    _require(
        not request.get("shared_process") or (shareable and not request.get("interactive")),
        "shared_process is for the python runner's script, call and assert tests, never interactive ones",
    )
    program_files = request.get("program_files")
    _require(
        program_files is None
        or (isinstance(program_files, dict) and all(isinstance(text, str) for text in program_files.values())),
        "program_files must map names to texts",
    )
    fields = ("time_limit_s", "wall_limit_s", "compile_time_limit_s", "compile_wall_limit_s", "output_limit_bytes")
    for field in (*fields, *(["cpus"] if request.get("cpus") is not None else [])):
        value = request.get(field)
        _require(
            isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0,
            f"{field} must be a positive number",
        )
    if request.get("runner") == "process":
        spec = request.get("process")
        _require(
            isinstance(spec, dict)
            and isinstance(spec.get("source"), str)
            and _is_argv(spec.get("run"))
            and (spec.get("compile") is None or _is_argv(spec.get("compile"))),
            "the process runner needs process.source, process.run and optionally process.compile",
        )
        _require(request["mode"] == "script", "the process runner runs script tests only")
    if request.get("runner") == "node":
        _require(request["mode"] in ("call", "assert"), "the node runner runs call and assert tests only")
    key = {"script": "stdin", "call": "args", "assert": "code"}.get(request["mode"], "")
    if request["mode"] == "prime":
        key = "stdin" if request.get("entry") is None else "args"
    for index, test in enumerate(request["tests"]):
        _require(isinstance(test, dict) and key in test, f"test {index} needs {key!r}")
        if request["mode"] == "script":
            _require(test.get("argv") is None or _is_argv(test["argv"]), f"test {index}: argv must be strings")
            files = test.get("files")
            _require(
                files is None or (isinstance(files, dict) and all(isinstance(t, str) for t in files.values())),
                f"test {index}: files must map names to texts",
            )
    return request


def _is_argv(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(part, str) for part in value)


def read_request() -> tuple[bytes, bytes]:
    """The request (its first line, or everything up to the end of stdin), and what followed it
    (the start of an interactive request's live feed)."""
    chunks = bytearray()
    while b"\n" not in chunks:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        chunks += chunk
        if len(chunks) > MAX_REQUEST_BYTES:
            raise RequestError(f"request exceeds {MAX_REQUEST_BYTES} bytes")
    request, _, rest = bytes(chunks).partition(b"\n")
    return request, rest


def _close_stdin() -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)


def main() -> None:
    make_undumpable()
    frames = Frames()
    wakeup = ChildWakeup()
    workspace = Workspace()
    # A warm container may wait long for its request: have a Python worker ready by then,
    # forked now, while this process holds nothing of the request.
    spare = Worker(workspace, before_request=True)
    try:
        raw, rest = read_request()
        request = parse_request(raw)
    except RequestError as exc:
        spare.kill()
        frames.emit({"type": "error", "message": str(exc)})
        raise SystemExit(2) from None
    feed = None
    if request.get("interactive"):
        feed = HostFeed(0, rest)
    else:
        _close_stdin()
    frames.emit({"type": "hello", "protocol": PROTOCOL_VERSION, "tests": len(request["tests"])})
    supervisor = Supervisor(request, workspace, wakeup, frames, feed)
    runner = runner_for(request, supervisor, spare)
    ran = 0
    try:
        for frame in runner.frames():
            try:
                frames.emit(frame)
            except (ValueError, TypeError, RecursionError) as exc:
                frames.emit(supervisor.broken(frame["index"], f"its report could not be written: {exc}"))
            ran += 1
    finally:
        runner.close()
        workspace.close()
    frames.emit({"type": "done", "tests": ran})
    # Nothing is left to flush (frames are written unbuffered, the workers are gone), and the
    # interpreter's teardown of this process's modules would cost 1.5 ms of every container.
    os._exit(0)
