"""The trusted half of the in-container harness.

Runs as the container's PID 1, marked not dumpable before it reads anything: a submission
(same uid) can then neither read its memory, nor open ``/proc/1/fd/1``, nor signal it (the
kernel drops signals to a namespace's init that it has no handler for). It reads the job
from stdin, starts a worker (a fresh interpreter that runs the submission), keeps the clock,
kills on timeouts, reads each test's output from files it opened itself, and reports what
it observed as frames on stdout (see ``protocol``). Expected outputs are never sent here;
in assert mode the trusted test code runs in this process and calls the submission across
the process boundary, receiving plain values only.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import json
import os
import signal
import socket
import stat
import sys
import time

from . import codec
from ._typing import TYPE_CHECKING
from .channel import Channel, ChannelClosed, ChannelError, ChannelTimeout
from .protocol import (
    ABORTED,
    ASSERTION_FAILED,
    COMPILE_ERROR,
    LOAD_ALLOWANCE_S,
    MAX_ERROR_CHARS,
    MAX_REQUEST_BYTES,
    MEMORY_LIMIT,
    MODES,
    OK,
    OUTPUT_LIMIT,
    PROTOCOL_VERSION,
    RUNTIME_ERROR,
    TIMEOUT,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, NoReturn

PR_SET_DUMPABLE = 4
# The user programs run as. When the harness itself starts as root (it does under gVisor, whose
# root is not the host's), this difference in uid is what keeps the program away from it.
PROGRAM_UID = 65534
SETPRIV = "/usr/bin/setpriv"
# How often a running test's output files are measured against the output limit.
OUTPUT_POLL_S = 0.02
# Time allowed for deleting what a test wrote before the next one starts.
SCRUB_LIMIT_S = 2.0
WORKER_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    # One thread per numeric library: the pids limit counts threads, and the CPU quota is shared.
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


class RequestError(ValueError):
    """The request document is unusable."""


class _Abort(BaseException):
    """Ends a test early; ``status`` says why."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


def make_undumpable() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def read_text(path: str) -> str:
    with open(path, encoding="utf-8") as file:
        return file.read()


def oom_kills() -> int | None:
    """The memory cgroup's OOM-kill counter (cgroup v1 or v2), if visible."""
    for path, key in (
        ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),
        ("/sys/fs/cgroup/memory.events", "oom_kill"),
    ):
        try:
            for line in read_text(path).splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
        except (OSError, ValueError):
            continue
    return None


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise RequestError(message)


def parse_request(raw: bytes) -> dict[str, Any]:
    try:
        request: dict[str, Any] = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RequestError(f"request is not JSON: {exc}") from exc
    _require(isinstance(request, dict), "request must be a JSON object")
    _require(
        request.get("protocol") == PROTOCOL_VERSION,
        f"protocol {request.get('protocol')!r} is not supported (this harness speaks {PROTOCOL_VERSION})",
    )
    _require(request.get("mode") in MODES, f"mode must be one of {MODES}")
    _require(isinstance(request.get("code"), str), "code must be a string")
    _require(isinstance(request.get("tests"), list), "tests must be a list")
    _require(request["mode"] != "call" or isinstance(request.get("entry"), str), "call mode needs an entry name")
    _require(request.get("entry") is None or isinstance(request["entry"], str), "entry must be a string")
    for field in ("time_limit_s", "output_limit_bytes"):
        value = request.get(field)
        _require(
            isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0,
            f"{field} must be a positive number",
        )
    key = {"script": "stdin", "call": "args", "assert": "code"}.get(request["mode"], "")
    if request["mode"] == "prime":
        key = "stdin" if request.get("entry") is None else "args"
    for index, test in enumerate(request["tests"]):
        _require(isinstance(test, dict) and key in test, f"test {index} needs {key!r}")
    return request


class Frames:
    """The result channel: a private copy of the original stdout."""

    def __init__(self) -> None:
        self._fd = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 1)
        os.close(devnull)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process

    def emit(self, frame: dict[str, Any]) -> None:
        data = (json.dumps(frame, allow_nan=False, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]


class Workspace:
    """The harness's directory: the program's file, and the per-test working directory."""

    def __init__(self) -> None:
        # Unique per harness process; private like tempfile.mkdtemp's, without its import cost.
        self.root = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"airlock-{os.getpid()}-{time.time_ns()}")
        os.mkdir(self.root, 0o700)
        self.program_dir = os.path.join(self.root, "program")
        os.mkdir(self.program_dir)
        self.program_path = os.path.join(self.program_dir, "main.py")
        # Each test starts in an empty working directory; what one test leaves there, the next never sees.
        self.workdir = os.path.join(self.root, "work")
        for path in (self.root, self.program_dir):
            hand_to_program(path)


class Worker:
    """One worker process and its control channel."""

    def __init__(self, workspace: Workspace) -> None:
        parent_sock, child_sock = socket.socketpair()
        self.channel = Channel(parent_sock)
        package_dir = os.path.dirname(os.path.realpath(__file__))
        for _ in __package__.split("."):
            package_dir = os.path.dirname(package_dir)
        argv = [
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path.insert(0, {package_dir!r}); "
            f"from {__package__}.worker import main; main({child_sock.fileno()}, {package_dir!r})",
        ]
        if splits_users():
            # A harness started as root runs the program as another user.
            argv = [SETPRIV, f"--reuid={PROGRAM_UID}", f"--regid={PROGRAM_UID}", "--clear-groups", "--", *argv]
        os.set_inheritable(child_sock.fileno(), True)
        devnull = os.open(os.devnull, os.O_RDONLY)
        # What the program prints while it loads is not a test's output; only its errors are kept.
        self.load_err = memory_file("load-stderr")
        try:
            self.pid = os.posix_spawn(
                argv[0],
                argv,
                {**WORKER_ENV, "HOME": workspace.workdir, "TMPDIR": workspace.workdir},
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, devnull, 0),
                    (os.POSIX_SPAWN_DUP2, devnull, 1),
                    (os.POSIX_SPAWN_DUP2, self.load_err, 2),
                ],
                setsid=True,
            )
        finally:
            os.close(devnull)
            child_sock.close()
        self.alive = True

    def load_stderr(self) -> str:
        return os.pread(self.load_err, MAX_ERROR_CHARS, 0).decode("utf-8", errors="replace")

    def kill(self) -> None:
        if not self.alive:
            return
        self.alive = False
        self.channel.close()
        os.close(self.load_err)
        if os.getpid() == 1:
            kill_all_but(set())
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
        reap_children()


def memory_file(name: str, data: bytes = b"") -> int:
    """An anonymous in-memory file: no path, so nothing the submission does can swap, fill or replace it."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    if data:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    return fd


def splits_users() -> bool:
    """Whether the program runs as another user than the harness: when the harness is a sandbox's
    PID 1 started as root (under gVisor). A harness run by hand keeps one user."""
    return os.getpid() == 1 and os.geteuid() == 0


def hand_to_program(path: str) -> None:
    """Let the program's user own ``path`` when it is not the harness's user."""
    if splits_users():
        os.chown(path, PROGRAM_UID, PROGRAM_UID)


def remove_tree(path: str, deadline: float) -> None:
    """Delete ``path`` however the submission left it (read-only modes, deep nesting), within a deadline."""
    stack = [(path, False)]
    while stack and time.monotonic() < deadline:
        current, emptied = stack.pop()
        try:
            info = os.lstat(current)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            with contextlib.suppress(OSError):
                os.unlink(current)
        elif emptied:
            with contextlib.suppress(OSError):
                os.rmdir(current)
        else:
            with contextlib.suppress(OSError):
                os.chmod(current, 0o700)
            stack.append((current, True))
            with contextlib.suppress(OSError):
                stack.extend((os.path.join(current, name), False) for name in os.listdir(current))


def reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _state_and_parent(pid: int) -> tuple[str, int] | None:
    try:
        fields = read_text(f"/proc/{pid}/stat").rpartition(")")[2].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def kill_all_but(keep: set[int]) -> None:
    """As PID 1, SIGKILL every other process in the namespace except ``keep``, and reap them all.

    Killed processes die asynchronously and their orphans come back to us as zombies, so this
    loops until nothing is left but ``keep`` (and zombies ``keep`` itself has yet to reap).
    """
    for _ in range(500):
        reap_children()
        left = False
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != 1 and int(p) not in keep):
            found = _state_and_parent(pid)
            if found is None or (found[0] == "Z" and found[1] in keep):
                continue
            left = True
            if found[0] != "Z":
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if not left:
            return
        time.sleep(0.001)


class _RemoteFunction:
    """Stands for one of the program's functions inside trusted test code."""

    def __init__(self, session: Session, name: str) -> None:
        self._session = session
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._session.remote_call(self._name, args, kwargs)

    def __repr__(self) -> str:
        return f"<function {self._name}>"


def _remote_exception(error: dict[str, Any]) -> Exception:
    cls = getattr(builtins, str(error.get("type")), None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = RuntimeError
    try:
        exc = cls(error.get("message", ""))
    except Exception:  # noqa: BLE001 - some builtin exceptions take other arguments
        exc = RuntimeError(error.get("message", ""))
    exc.airlock_remote_error = error  # type: ignore[attr-defined]
    return exc


TEST_FILE = "<test>"


def describe(exc: BaseException, test_code: str = "") -> dict[str, str]:
    """An error raised while running test code, told from the test code's point of view.

    The traceback starts at the test code's frames; a bare ``assert`` gets the failing line as
    its message.
    """
    remote = getattr(exc, "airlock_remote_error", None)
    if isinstance(remote, dict):
        return remote
    import traceback

    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != TEST_FILE:
        tb = tb.tb_next
    message = str(exc)
    if not message and tb is not None:
        last = tb
        while last.tb_next is not None and last.tb_next.tb_frame.f_code.co_filename == TEST_FILE:
            last = last.tb_next
        lines = test_code.splitlines()
        if 0 < last.tb_lineno <= len(lines):
            message = f"failed: {lines[last.tb_lineno - 1].strip()}"
    return {
        "type": type(exc).__name__,
        "message": message[:MAX_ERROR_CHARS],
        "traceback": "".join(traceback.format_exception(type(exc), exc, tb))[-MAX_ERROR_CHARS:],
    }


class Session:
    """Everything for one request: files, the worker, and the per-test loop."""

    def __init__(
        self, request: dict[str, Any], workspace: Workspace | None = None, spare: Worker | None = None
    ) -> None:
        self.request = request
        self.mode: str = request["mode"]
        self.time_limit_s = float(request["time_limit_s"])
        self.output_limit = int(request["output_limit_bytes"])
        self.workspace = workspace or Workspace()
        self.root = self.workspace.root
        self.workdir = self.workspace.workdir
        self.program_path = self.workspace.program_path
        with open(self.program_path, "w", encoding="utf-8", errors="surrogatepass") as program:
            program.write(request["code"])
        hand_to_program(self.program_path)
        # A worker started while the request was still arriving, already past its interpreter's start.
        self._spare = spare
        self.worker: Worker | None = None
        self.load_failure: dict[str, Any] | None = None
        self.program_globals: list[str] = []
        self._abort: _Abort | None = None
        self._deadline = 0.0
        self._output_fds: tuple[int, ...] = ()

    # -- files -----------------------------------------------------------------------------

    def _scrub(self) -> None:
        """Remove what the last test wrote, so that the next one starts clean.

        That is its working directory (also its HOME and TMPDIR); and, as PID 1 (inside the
        sandbox, where every writable place is ours), the rest of /tmp and /dev/shm too.
        """
        deadline = time.monotonic() + SCRUB_LIMIT_S
        remove_tree(self.workdir, deadline)
        if os.getpid() != 1:
            return
        program_dir = self.workspace.program_dir
        keep = {self.root, program_dir, self.program_path}
        for top in ("/tmp", self.root, program_dir, "/dev/shm"):
            with contextlib.suppress(OSError):
                for entry in os.listdir(top):
                    path = os.path.join(top, entry)
                    if path not in keep:
                        remove_tree(path, deadline)

    def _read_capped(self, fd: int) -> tuple[str, bool]:
        data = os.pread(fd, self.output_limit + 1, 0)
        truncated = len(data) > self.output_limit
        return data[: self.output_limit].decode("utf-8", errors="replace"), truncated

    # -- worker ----------------------------------------------------------------------------

    def _ensure_worker(self) -> Worker | None:
        if self.load_failure is not None:
            return None
        if self.worker is not None and self.worker.alive:
            return self.worker
        oom_before = oom_kills()
        worker, self._spare = self._spare or Worker(self.workspace), None
        load = {
            "op": "load",
            "mode": self.mode,
            "code": self.request["code"],
            "path": self.program_path,
            "entry": self.request.get("entry"),
            "workdir": self.workspace.program_dir,
        }
        try:
            worker.channel.send(load)
            reply = worker.channel.recv(deadline=time.monotonic() + self.time_limit_s + LOAD_ALLOWANCE_S)
            if reply.get("op") != "loaded":
                raise ChannelError("expected 'loaded'")
        except ChannelTimeout:
            worker.kill()
            self.load_failure = {
                "status": TIMEOUT,
                "error": {"type": "Timeout", "message": "loading the program took too long", "traceback": ""},
            }
            return None
        except (ChannelClosed, ChannelError, OSError) as exc:
            stderr = worker.load_stderr()
            worker.kill()
            status = MEMORY_LIMIT if _grew(oom_before, oom_kills()) else RUNTIME_ERROR
            self.load_failure = {
                "status": status,
                "error": {
                    "type": "WorkerLost",
                    "message": f"the program broke off while loading: {exc}",
                    "traceback": stderr,
                },
            }
            return None
        if not reply.get("ok"):
            worker.kill()
            error = reply.get("error") if isinstance(reply.get("error"), dict) else {}
            stage = reply.get("stage")
            # A program that does not parse, or lacks the function to call, never ran: a compile error.
            self.load_failure = {
                "status": COMPILE_ERROR if stage in ("compile", "entry") else RUNTIME_ERROR,
                "error": _clean_error(error),
                "stage": stage,
            }
            return None
        names = reply.get("globals", [])
        self.program_globals = [n for n in names if isinstance(n, str) and n.isidentifier()]
        self.worker = worker
        return worker

    def _expect(self, *ops: str) -> dict[str, Any]:
        """Wait for the worker's next message, watching the clock and the test's output size."""
        assert self.worker is not None
        while not self.worker.channel.wait_readable(min(OUTPUT_POLL_S, self._deadline - time.monotonic())):
            if time.monotonic() >= self._deadline:
                raise _Abort(TIMEOUT, f"time limit of {self.time_limit_s:g} s exceeded")
            if any(os.fstat(fd).st_size > self.output_limit for fd in self._output_fds):
                raise _Abort(OUTPUT_LIMIT, f"output exceeded {self.output_limit} bytes")
        try:
            message = self.worker.channel.recv(deadline=self._deadline)
            for fd in self.worker.channel.fds:  # never accept descriptors from the submission's side
                os.close(fd)
        except ChannelTimeout:
            raise _Abort(TIMEOUT, f"time limit of {self.time_limit_s:g} s exceeded") from None
        except ChannelClosed:
            raise _Abort(RUNTIME_ERROR, "the program's process ended unexpectedly") from None
        except ChannelError as exc:
            raise _Abort(RUNTIME_ERROR, f"the program broke the harness protocol: {exc}") from None
        if message["op"] not in ops:
            raise _Abort(RUNTIME_ERROR, f"the program broke the harness protocol: expected {' or '.join(ops)}")
        return message

    # -- assert mode -------------------------------------------------------------------------

    def remote_call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._abort is not None:
            raise self._abort
        assert self.worker is not None
        try:
            payload = {"op": "call", "name": name, "args": codec.encode(list(args)), "kwargs": codec.encode(kwargs)}
        except codec.CodecError as exc:
            raise TypeError(f"cannot pass this argument to the program: {exc}") from None
        try:
            self.worker.channel.send(payload)
            reply = self._expect("reply")
            if reply.get("ok"):
                return codec.decode(reply.get("value"))
        except _Abort as abort:
            self._abort = abort
            raise
        except (OSError, codec.CodecError) as exc:
            self._abort = _Abort(RUNTIME_ERROR, f"the program broke the harness protocol: {exc}")
            raise self._abort from None
        raise _remote_exception(_clean_error(reply.get("error")))

    def _run_assertions(self, test_code: str) -> tuple[str, dict[str, str] | None]:
        entry = self.request.get("entry")
        namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        for name in self.program_globals:
            namespace[name] = _RemoteFunction(self, name)
        if entry:
            namespace[entry] = namespace["candidate"] = _RemoteFunction(self, entry)

        def on_alarm(signum: int, frame: Any) -> NoReturn:
            raise _Abort(TIMEOUT, f"time limit of {self.time_limit_s:g} s exceeded")

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, max(self._deadline - time.monotonic(), 0.001))
        try:
            exec(compile(test_code, TEST_FILE, "exec", dont_inherit=True), namespace)
            status, error = OK, None
        except _Abort as abort:
            self._abort = abort
            status, error = abort.status, None
        except AssertionError as exc:
            status, error = ASSERTION_FAILED, describe(exc, test_code)
        except BaseException as exc:  # noqa: BLE001 - any failure of the test code is a failed test
            status, error = RUNTIME_ERROR, describe(exc, test_code)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        if self._abort is not None:
            return self._abort.status, {"type": "Abort", "message": str(self._abort), "traceback": ""}
        return status, error

    # -- one test ------------------------------------------------------------------------------

    def frames(self) -> Iterator[dict[str, Any]]:
        """Run the request's tests and yield one report frame per test that ran."""
        stop = bool(self.request.get("stop_on_failure"))
        if self.mode == "prime":
            tests = list(enumerate(self.request["tests"]))
            # Isolated: each test in a fresh process of its own, as the reference's per-test retries are.
            for group in [[t] for t in tests] if self.request.get("isolate") else [tests]:
                yield from self._prime_session(group)
            return
        for index, test in enumerate(self.request["tests"]):
            frame = self.run(index, test)
            yield frame
            if stop and frame["status"] != OK:
                return

    def _open_test_io(self, stdin: str) -> tuple[int, int, int]:
        stdin_fd = memory_file("stdin", stdin.encode("utf-8", errors="surrogateescape"))
        self._output_fds = (memory_file("stdout"), memory_file("stderr"))
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.workdir)
        hand_to_program(self.workdir)
        self._abort = None
        return stdin_fd, *self._output_fds

    def _send_test(self, worker: Worker, message: dict[str, Any], stdin: str) -> None:
        stdin_fd, out_fd, err_fd = self._open_test_io(stdin)
        try:
            worker.channel.send({**message, "cwd": self.workdir}, fds=(stdin_fd, out_fd, err_fd))
        finally:
            os.close(stdin_fd)

    def _close_test_io(self, frame: dict[str, Any], worker: Worker) -> None:
        """Stop stragglers, read the output the test left, and clean up after it."""
        if worker.alive and os.getpid() == 1:
            kill_all_but({worker.pid})
        out_fd, err_fd = self._output_fds
        frame["stdout"], frame["stdout_truncated"] = self._read_capped(out_fd)
        frame["stderr"], frame["stderr_truncated"] = self._read_capped(err_fd)
        os.close(out_fd)
        os.close(err_fd)
        self._scrub()

    def run(self, index: int, test: dict[str, Any]) -> dict[str, Any]:
        frame: dict[str, Any] = {"type": "test", "index": index}
        worker = self._ensure_worker()
        if worker is None:
            return self._load_failure_frame(frame)
        message: dict[str, Any] = {"op": "test"}
        if self.mode == "call":
            message["args"] = test["args"]
        oom_before = oom_kills()
        started = time.monotonic()
        self._deadline = started + self.time_limit_s
        status, error, value = OK, None, None
        exit_info: dict[str, Any] = {}
        try:
            self._send_test(worker, message, str(test.get("stdin", "")) if self.mode == "script" else "")
            if self.mode == "call":
                status, error, value, exit_info = self._call_result()
            elif self.mode == "assert":
                self._expect("ready")
                status, error = self._run_assertions(test["code"])
                if self._abort is not None:
                    raise self._abort
                worker.channel.send({"op": "end"})
            exit_info = exit_info or self._expect("exit")
        except _Abort as abort:
            status, error = abort.status, {"type": "Abort", "message": str(abort), "traceback": ""}
            worker.kill()
        except OSError as exc:
            status, error = RUNTIME_ERROR, {"type": "WorkerLost", "message": str(exc), "traceback": ""}
            worker.kill()
        frame["wall_time_s"] = round(time.monotonic() - started, 6)
        self._close_test_io(frame, worker)
        exit_code, sig = exit_info.get("exit_code"), exit_info.get("signal")
        if status == OK and self.mode == "script" and (exit_code != 0 or sig is not None):
            status = RUNTIME_ERROR
        frame.update(
            status=self._final_status(status, frame, oom_before),
            exit_code=_int_or_none(exit_code),
            signal=_int_or_none(sig),
            max_rss_kb=_int_or_none(exit_info.get("max_rss_kb")),
            cpu_time_s=_float_or_none(exit_info.get("cpu_time_s")),
            error=error,
        )
        if self.mode == "call" and frame["status"] == OK:
            frame["value"] = value
        return frame

    def _call_result(self) -> tuple[str, dict[str, str] | None, Any, dict[str, Any]]:
        """Status, error, value and (when the child died first) its exit record, for call mode."""
        result = self._expect("result", "exit")
        if result["op"] == "exit":
            message = f"the function did not return ({_describe_exit(result)})"
            return RUNTIME_ERROR, {"type": "NoResult", "message": message, "traceback": ""}, None, result
        if not result.get("ok"):
            return RUNTIME_ERROR, _clean_error(result.get("error")), None, {}
        value = result.get("value")
        if len(json.dumps(value, separators=(",", ":"))) > self.output_limit:
            error = {"type": "OutputLimit", "message": "the return value is too large", "traceback": ""}
            return OUTPUT_LIMIT, error, None, {}
        return OK, None, value, {}

    def _final_status(self, status: str, frame: dict[str, Any], oom_before: int | None) -> str:
        """The kernel's OOM kill outranks everything, then an output flood, then what was observed."""
        if _grew(oom_before, oom_kills()):
            return MEMORY_LIMIT
        if status != TIMEOUT and (frame["stdout_truncated"] or frame["stderr_truncated"]):
            return OUTPUT_LIMIT
        return status

    # -- prime mode ------------------------------------------------------------------------------

    def _prime_session(self, group: list[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
        """One reference ``run_test`` call: build once, then the tests in order in one process.

        Each step (the build, each test) gets ``time_limit_s``; the whole session gets
        ``session_limit_s``. The session ends at the first step that is not ``ok``.
        """
        worker = self._ensure_worker()
        assert worker is not None, "prime mode loads nothing that can fail"
        session_end = time.monotonic() + float(self.request.get("session_limit_s") or 1e9)
        oom_before = oom_kills()
        tests = [test for _, test in group]
        message = {
            "op": "prime",
            "fn_name": self.request.get("entry"),
            "tests": tests,
            "continue_after_error": bool(self.request.get("continue_after_error")),
        }
        started = time.monotonic()
        self._deadline = min(started + self.time_limit_s, session_end)
        frame: dict[str, Any] = {"type": "test", "index": group[0][0]}
        try:
            self._send_test(worker, message, "")
            built = self._expect("built", "exit")
            if built["op"] == "exit" or not built.get("ok"):
                status = ABORTED if built["op"] == "exit" or built.get("aborted") else COMPILE_ERROR
                yield self._prime_frame(frame, started, worker, status, built.get("error"), oom_before)
                return
            keep_going = bool(self.request.get("continue_after_error"))
            keep_going = bool(self.request.get("continue_after_error"))
            for index, _ in group:
                frame = {"type": "test", "index": index}
                started = time.monotonic()
                self._deadline = min(started + self.time_limit_s, session_end)
                observed = self._expect("observed", "exit")
                if observed["op"] == "exit":
                    error = {"type": "Aborted", "message": _describe_exit(observed), "traceback": ""}
                    yield self._prime_frame(frame, started, worker, ABORTED, error, oom_before)
                    return
                status = str(observed.get("status"))
                if status not in (OK, RUNTIME_ERROR, ABORTED):
                    raise _Abort(RUNTIME_ERROR, "the program broke the harness protocol: bad status")
                if status == OK:
                    # The captured text is what the reference judges; the fd-level output is context only.
                    frame["captured"] = observed.get("stdout")
                    frame["value"] = observed.get("value")
                ends = status == ABORTED or (status == RUNTIME_ERROR and not keep_going)
                last = ends or index == group[-1][0]
                yield self._prime_frame(frame, started, worker, status, observed.get("error"), oom_before, last=last)
                if ends:
                    return
        except _Abort as abort:
            worker.kill()
            error = {"type": "Abort", "message": str(abort), "traceback": ""}
            yield self._prime_frame(frame, started, worker, abort.status, error, oom_before)

    def _prime_frame(
        self,
        frame: dict[str, Any],
        started: float,
        worker: Worker,
        status: str,
        error: Any,
        oom_before: int | None,
        *,
        last: bool = True,
    ) -> dict[str, Any]:
        frame["wall_time_s"] = round(time.monotonic() - started, 6)
        if last:
            if worker.alive:
                try:
                    self._deadline = time.monotonic() + 1.0
                    self._expect("exit")
                except _Abort:
                    # Its exit record would arrive in the next session's place: start afresh instead.
                    worker.kill()
            self._close_test_io(frame, worker)
        else:
            frame.update(stdout="", stdout_truncated=False, stderr="", stderr_truncated=False)
        captured = frame.pop("captured", None)
        if isinstance(captured, str):
            # In prime mode the judged output is the text captured inside the process.
            frame["stdout"] = captured[: self.output_limit]
            frame["stdout_truncated"] = len(captured) > self.output_limit
        value = frame.pop("value", None)
        frame.update(
            status=self._final_status(status, frame, oom_before),
            exit_code=None,
            signal=None,
            max_rss_kb=None,
            cpu_time_s=None,
            error=_clean_error(error) if error is not None else None,
        )
        if frame["status"] == OK and self.request.get("entry") is not None:
            frame["value"] = value
        return frame

    def _load_failure_frame(self, frame: dict[str, Any]) -> dict[str, Any]:
        assert self.load_failure is not None
        failure = self.load_failure
        script_compile = self.mode == "script" and failure["status"] == COMPILE_ERROR
        frame.update(
            status=failure["status"],
            error=failure["error"],
            wall_time_s=0.0,
            stdout="",
            stdout_truncated=False,
            # A script with a syntax error behaves as `python3 main.py` would: exit 1, traceback on stderr.
            stderr=failure["error"].get("traceback", "") if script_compile else "",
            stderr_truncated=False,
            exit_code=1 if script_compile else None,
            signal=None,
            max_rss_kb=None,
            cpu_time_s=None,
        )
        return frame

    def close(self) -> None:
        for worker in (self.worker, self._spare):
            if worker is not None:
                worker.kill()
        remove_tree(self.root, time.monotonic() + SCRUB_LIMIT_S)


def _describe_exit(info: dict[str, Any]) -> str:
    if info.get("signal") is not None:
        return f"killed by signal {info['signal']}"
    return f"process exited with status {info.get('exit_code')}"


def _grew(before: int | None, after: int | None) -> bool:
    return before is not None and after is not None and after > before


def _int_or_none(value: Any) -> int | None:
    return value if type(value) is int else None


def _float_or_none(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) else None


def _clean_error(error: Any) -> dict[str, str]:
    """Keep only well-typed, bounded fields of an error the worker (untrusted) reported."""
    error = error if isinstance(error, dict) else {}
    return {key: str(error.get(key, ""))[-MAX_ERROR_CHARS:] for key in ("type", "message", "traceback")}


def read_request() -> bytes:
    chunks = bytearray()
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        chunks += chunk
        if len(chunks) > MAX_REQUEST_BYTES:
            raise RequestError(f"request exceeds {MAX_REQUEST_BYTES} bytes")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return bytes(chunks)


def main() -> None:
    make_undumpable()
    frames = Frames()
    # In a warm container the request may be long in coming: have a worker ready for it.
    workspace = Workspace()
    spare = Worker(workspace)
    try:
        request = parse_request(read_request())
    except RequestError as exc:
        spare.kill()
        frames.emit({"type": "error", "message": str(exc)})
        raise SystemExit(2) from None
    tests = request["tests"]
    frames.emit({"type": "hello", "protocol": PROTOCOL_VERSION, "tests": len(tests)})
    session = Session(request, workspace, spare)
    ran = 0
    try:
        for frame in session.frames():
            frames.emit(frame)
            ran += 1
    finally:
        session.close()
    frames.emit({"type": "done", "tests": ran})
