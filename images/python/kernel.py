"""A code-interpreter context inside a sandbox: IPython's shell, or for JavaScript and TypeScript
``kernel.js`` under Node, or Bash, driven over stdin and stdout (``kernel.py [LANGUAGE]``).

Each request is one JSON line on stdin (``{"code": ..., "env_vars": {...}}``); the answer is a
stream of JSON lines on the process's original stdout: ``stdout`` / ``stderr`` text as it is
written, ``result`` MIME bundles (the cell's value, ``display()`` calls, matplotlib figures),
an ``error``, and ``end``. The program's own file descriptors 1 and 2 are pipes that this
process forwards, so output of child processes arrives as ``stdout`` / ``stderr`` too.

This is the sandbox user's own session, not a verdict channel: nothing here is judged.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from typing import Any

PREBUILT_MPL_CACHE = "/opt/airlock/matplotlib"
JS_KERNEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel.js")
# Written into the program's descriptors at a cell's end: what a child wrote before it is in the
# pipe ahead of it, so the cell's output is complete once the forwarder has read it.
CELL_END = b"\x00airlock-cell-end\x00"


class Channel:
    """The protocol's one writer, shared by the shell and the forwarding threads."""

    def __init__(self, fd: int) -> None:
        self._out = os.fdopen(fd, "w", encoding="utf-8", errors="replace", buffering=1)
        self._lock = threading.Lock()

    def emit(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, default=str)
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()


class StreamWriter(io.TextIOBase):
    """sys.stdout / sys.stderr: each complete line becomes an event at once, the rest on flush
    (the end of every cell flushes), as Jupyter batches a stream."""

    def __init__(self, channel: Channel, name: str) -> None:
        self._channel = channel
        self._name = name
        self._pending = ""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        self._pending += text
        complete, newline, rest = self._pending.rpartition("\n")
        if newline:
            self._pending = rest
            self._channel.emit({"type": self._name, "text": complete + newline})
        return len(text)

    def flush(self) -> None:
        if self._pending:
            text, self._pending = self._pending, ""
            self._channel.emit({"type": self._name, "text": text})


def forward(fd: int, channel: Channel, name: str, drained: threading.Event) -> None:
    """Forward a descriptor's pipe as events, setting ``drained`` at each ``CELL_END``."""

    def emit(data: bytes) -> None:
        if data:
            channel.emit({"type": name, "text": data.decode("utf-8", errors="replace")})

    pending = b""
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(65536):
            pending += chunk
            while (at := pending.find(CELL_END)) >= 0:
                emit(pending[:at])
                pending = pending[at + len(CELL_END) :]
                drained.set()
            # Hold back what may be the start of a marker cut by the read.
            held = next((n for n in range(len(CELL_END) - 1, 0, -1) if pending.endswith(CELL_END[:n])), 0)
            emit(pending[: len(pending) - held])
            pending = pending[len(pending) - held :]


def redirect_descriptors(channel: Channel) -> list[tuple[int, threading.Event]]:
    """fds 1 and 2 as pipes forwarded as events; each with the event its forwarder sets when it
    reads a ``CELL_END``."""
    forwarded = []
    for fd, name in ((1, "stdout"), (2, "stderr")):
        read, write = os.pipe()
        os.dup2(write, fd)
        os.close(write)
        drained = threading.Event()
        threading.Thread(target=forward, args=(read, channel, name, drained), daemon=True).start()
        forwarded.append((fd, drained))
    return forwarded


def drain(forwarded: list[tuple[int, threading.Event]]) -> None:
    """Wait until what the cell's processes wrote to fds 1 and 2 has been forwarded."""
    for fd, drained in forwarded:
        drained.clear()
        os.write(fd, CELL_END)
    for _, drained in forwarded:
        drained.wait(timeout=5)


def prepare_matplotlib() -> None:
    """The font cache built with the image, copied where matplotlib looks for it (building it
    anew takes seconds), and a backend that draws without a display."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    cache = os.path.join(os.path.expanduser("~"), ".cache", "matplotlib")
    if os.path.isdir(PREBUILT_MPL_CACHE) and not os.path.isdir(cache):
        with contextlib.suppress(OSError):
            shutil.copytree(PREBUILT_MPL_CACHE, cache)


def make_shell(channel: Channel) -> Any:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance(colors="NoColor")

    def capture_value(format_dict: dict[str, Any], md_dict: Any = None) -> None:
        channel.emit({"type": "result", "is_main_result": True, "data": format_dict})

    hook = shell.displayhook
    hook.write_output_prompt = lambda: None
    hook.write_format_data = capture_value
    hook.finish_displayhook = lambda: None

    def publish(data: dict[str, Any], metadata: Any = None, **_: Any) -> None:
        channel.emit({"type": "result", "is_main_result": False, "data": data})

    shell.display_pub.publish = publish

    def show_traceback(etype: type[BaseException], evalue: BaseException, stb: list[str]) -> None:
        name = getattr(etype, "__name__", str(etype))
        channel.emit({"type": "error", "name": name, "value": str(evalue), "traceback": "\n".join(stb)})

    shell._showtraceback = show_traceback
    return shell


def flush_figures(channel: Channel) -> None:
    """Every figure a cell left open, as a PNG result, then closed (what Jupyter's inline backend does)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for number in pyplot.get_fignums():
        figure = pyplot.figure(number)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", bbox_inches="tight")
        png = base64.b64encode(buffer.getvalue()).decode()
        data = {"image/png": png, "text/plain": repr(figure)}
        channel.emit({"type": "result", "is_main_result": False, "data": data})
    pyplot.close("all")


def run(shell: Any, channel: Channel, request: dict[str, Any], forwarded: list[tuple[int, threading.Event]]) -> None:
    saved = dict(os.environ)
    os.environ.update({str(k): str(v) for k, v in (request.get("env_vars") or {}).items()})
    try:
        shell.run_cell(request.get("code", ""), store_history=True)
        flush_figures(channel)
    except KeyboardInterrupt:
        channel.emit({"type": "error", "name": "KeyboardInterrupt", "value": "", "traceback": "KeyboardInterrupt"})
    finally:
        os.environ.clear()
        os.environ.update(saved)
        sys.stdout.flush()
        sys.stderr.flush()
        drain(forwarded)
    channel.emit({"type": "end", "execution_count": shell.execution_count - 1})


def error_event(name: str, value: str) -> dict[str, Any]:
    return {"type": "error", "name": name, "value": value, "traceback": ""}


class ChildShell:
    """A JavaScript or TypeScript context (``kernel.js`` under Node) or a Bash one, in a process of
    its own that keeps the state: what its cells print reaches this kernel's forwarded fds 1 and
    2, and what it says about a cell (its value, its error, its end) comes on a pipe of its own.
    This process then only relays, and ignores the interrupt that is the child's to take."""

    def __init__(self, language: str) -> None:
        read, write = os.pipe()
        argv = ["bash", "--noprofile", "--norc"] if language == "bash" else ["node", JS_KERNEL, language, str(write)]
        self.language = language
        self.execution_count = 0
        self._write_fd = write
        self._process = subprocess.Popen(argv, stdin=subprocess.PIPE, pass_fds=(write,))
        os.close(write)
        self._reports = os.fdopen(read, "r", encoding="utf-8", errors="replace")
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if language == "bash":
            # An interrupt ends the cell being sourced; the shell and its state stay.
            self._send("trap 'return 130 2>/dev/null' INT\n")
        elif self._report().get("type") != "ready":
            raise SystemExit("the JavaScript kernel did not start")

    def _send(self, text: str) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(text.encode("utf-8", errors="surrogateescape"))
        self._process.stdin.flush()

    def _report(self) -> dict[str, Any]:
        line = self._reports.readline()
        if not line:
            raise SystemExit(f"the {self.language} interpreter ended")  # the host reports the context lost
        report: dict[str, Any] = json.loads(line)
        return report

    def run(self, channel: Channel, request: dict[str, Any]) -> None:
        self.execution_count += 1
        if self.language != "bash":
            self._send(json.dumps(request) + "\n")
            while (report := self._report()).get("type") != "done":
                if report.get("type") in ("result", "error"):
                    channel.emit(report)
            return
        names = [str(name) for name in request["env_vars"]]
        if not all(name.isidentifier() and name.isascii() for name in names):
            channel.emit(error_event("ValueError", "env_vars: not names Bash takes"))
            return
        listed = " ".join(names)
        # The cell's variables are exported for it alone: as they were before, after it.
        saved = f"__airlock_env=$(declare -p {listed} 2>/dev/null)\n" if names else ""
        exports = "".join(f"export {name}={shlex.quote(str(value))}\n" for name, value in request["env_vars"].items())
        restored = f'unset {listed}; eval "$__airlock_env"; unset __airlock_env\n' if names else ""
        # Sourced, so that what it defines stays and an interrupt (the trap's return) ends the
        # cell alone; from a file of its own, so that one that does not parse ends with a
        # status; with no input, so that it cannot read what follows it.
        fence = "AIRLOCK_CELL_" + secrets.token_hex(8)
        code = str(request.get("code", ""))
        self._send(
            f"{saved}{exports}source <(cat <<'{fence}'\n{code}\n{fence}\n) < /dev/null\n"
            f"__airlock_status=$?\n{restored}echo $__airlock_status >&{self._write_fd}\n"
        )
        status = self._reports.readline().strip()
        if not status:
            raise SystemExit("bash ended")
        if status != "0":
            channel.emit(error_event("CommandExitError", f"exit status {status}"))


def serve(channel: Channel, requests: Any, forwarded: list[tuple[int, threading.Event]], shell: Any) -> None:
    for line in requests:
        try:
            request = json.loads(line)
            if not isinstance(request, dict) or not isinstance(request.get("env_vars") or {}, dict):
                raise ValueError("a request is an object with code and env_vars")
        except ValueError as exc:
            channel.emit(error_event("ProtocolError", str(exc)))
            channel.emit({"type": "end", "execution_count": shell.execution_count - 1})
            continue
        request["env_vars"] = request.get("env_vars") or {}
        if isinstance(shell, ChildShell):
            try:
                shell.run(channel, request)
            finally:
                drain(forwarded)
            channel.emit({"type": "end", "execution_count": shell.execution_count})
            continue
        try:
            run(shell, channel, request, forwarded)
        except KeyboardInterrupt:
            # Interrupted between cells: nothing was running.
            channel.emit({"type": "end", "execution_count": shell.execution_count - 1})


def main() -> None:
    language = sys.argv[1] if len(sys.argv) > 1 else "python"
    channel = Channel(os.dup(1))
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    forwarded = redirect_descriptors(channel)
    sys.stdout = StreamWriter(channel, "stdout")
    sys.stderr = StreamWriter(channel, "stderr")
    if language == "python":
        sys.path.insert(0, "")
        prepare_matplotlib()
        shell = make_shell(channel)
    else:
        shell = ChildShell(language)
    channel.emit({"type": "ready"})
    serve(channel, requests, forwarded, shell)


if __name__ == "__main__":
    main()
