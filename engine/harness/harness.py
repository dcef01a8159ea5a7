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
from .lockdown import make_undumpable
from .protocol import (
    ABORTED,
    ASSERTION_FAILED,
    COMPILE_ERROR,
    LOAD_ALLOWANCE_S,
    MAX_ERROR_BYTES,
    MAX_REQUEST_BYTES,
    MEMORY_LIMIT,
    MODES,
    OK,
    OUTPUT_LIMIT,
    PROTOCOL_VERSION,
    RUNTIME_ERROR,
    TIMEOUT,
    clip_text,
)

if TYPE_CHECKING:
    from collections.abc import Container, Iterator
    from typing import Any, NoReturn

# The user programs run as. When the harness itself starts as root (it does under gVisor, whose
# root is not the host's), this difference in uid is what keeps the program away from it.
PROGRAM_UID = int(os.environ.get("AIRLOCK_SANDBOX_UID", "65534"))
SETPRIV = "/usr/bin/setpriv"
# How often a running test's output files are measured against the output limit.
OUTPUT_POLL_S = 0.02
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
        return clip_text(os.pread(self.load_err, MAX_ERROR_BYTES, 0).decode("utf-8", errors="replace"), MAX_ERROR_BYTES)

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
        os.chown(path, PROGRAM_UID, PROGRAM_UID, follow_symlinks=False)


def _input_bytes(text: str) -> bytes:
    # Text that stood for raw bytes (surrogateescape) goes back to those bytes; any other lone
    # surrogate (JSON can carry one) is written as UTF-8 would, were it allowed.
    try:
        return text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="surrogatepass")


def clear_directory(path: str, keep: Container[str] = ()) -> None:
    """Delete everything inside ``path`` except the names in ``keep``, however the program left
    it: any depth, any modes, any names.

    It walks through directory descriptors, one open at a time (down by name, back up by
    ``..``), so a chain of directories deeper than ``PATH_MAX`` goes like any other, and the
    open-files limit is never in the way. Nothing else runs meanwhile (the program's processes
    are gone), and the scratch file systems bound the number of entries.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    pending = [_unlink_files(fd, keep)]
    depth: list[str] = []
    try:
        while pending:
            if pending[-1]:
                name = pending[-1].pop()
                with contextlib.suppress(OSError):
                    os.chmod(name, 0o700, dir_fd=fd)
                try:
                    child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError:
                    continue
                os.close(fd)
                fd = child
                depth.append(name)
                pending.append(_unlink_files(fd))
                continue
            pending.pop()
            if depth:
                parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = parent
                with contextlib.suppress(OSError):
                    os.rmdir(depth.pop(), dir_fd=fd)
    finally:
        os.close(fd)


def _unlink_files(fd: int, keep: Container[str] = ()) -> list[str]:
    """Unlink every non-directory in the directory open as ``fd``; return its subdirectories."""
    subdirectories = []
    with contextlib.suppress(OSError), os.scandir(fd) as entries:
        for entry in entries:
            if entry.name in keep:
                continue
            try:
                is_directory = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_directory = False
            if is_directory:
                subdirectories.append(entry.name)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.name, dir_fd=fd)
    return subdirectories


def remove_tree(path: str) -> None:
    """Delete ``path`` (a file, a link or a whole directory tree)."""
    try:
        info = os.lstat(path)
    except OSError:
        return
    if stat.S_ISDIR(info.st_mode):
        clear_directory(path)
        with contextlib.suppress(OSError):
            os.rmdir(path)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


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


# Exceptions that end an iteration where the test code may be iterating: were the program to
# raise one (``all(map(check, cases))`` would stop at the first case and pass), it would choose
# the test's control flow. Raised by the program, they arrive as RuntimeError.
_STEERING_EXCEPTIONS = (StopIteration, StopAsyncIteration)


def _remote_exception(error: dict[str, Any]) -> Exception:
    """The program's exception, rebuilt as the builtin exception of its name (the test code may
    expect a ``ValueError``), or a ``RuntimeError``."""
    cls = getattr(builtins, str(error.get("type")), None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)) or issubclass(cls, _STEERING_EXCEPTIONS):
        cls = RuntimeError
    try:
        exc = cls(error.get("message", ""))
    except Exception:  # noqa: BLE001 - some builtin exceptions take other arguments
        exc = RuntimeError(error.get("message", ""))
    exc.airlock_remote_error = error  # type: ignore[attr-defined]
    return exc


TEST_FILE = "<test>"
PRELUDE_FILE = "<prelude>"


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
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a value too large to print (say) must not end the harness
        message = f"<{type(exc).__name__} that cannot be shown>"
    if not message and tb is not None:
        last = tb
        while last.tb_next is not None and last.tb_next.tb_frame.f_code.co_filename == TEST_FILE:
            last = last.tb_next
        lines = test_code.splitlines()
        if 0 < last.tb_lineno <= len(lines):
            message = f"failed: {lines[last.tb_lineno - 1].strip()}"
    return {
        "type": type(exc).__name__,
        "message": clip_text(message, MAX_ERROR_BYTES),
        "traceback": clip_text("".join(traceback.format_exception(type(exc), exc, tb)), MAX_ERROR_BYTES, keep_end=True),
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
        """Remove what the last test left, so that the next one starts clean.

        That is its working directory (also its HOME and TMPDIR); and, as PID 1 (inside the
        sandbox, where every writable place is ours), the rest of /tmp and /dev/shm. (No IPC
        object can outlive a test: our seccomp profile refuses System V IPC and POSIX message
        queues, which no runtime lets us list and remove everywhere.)
        """
        remove_tree(self.workdir)
        if os.getpid() != 1:
            return
        workspace = self.workspace
        for folder in (workspace.root, workspace.program_dir):
            with contextlib.suppress(OSError):
                os.chmod(folder, 0o700)
        clear_directory("/tmp", keep={os.path.basename(workspace.root)})
        clear_directory(workspace.root, keep={os.path.basename(workspace.program_dir)})
        clear_directory(workspace.program_dir, keep={os.path.basename(workspace.program_path)})
        clear_directory("/dev/shm")

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

    def _run_assertions(self, test_code: str, prelude: str) -> tuple[str, dict[str, str] | None]:
        """Run trusted test code against the program.

        The test code resolves a name through the program only when nothing else defines it:
        its own names (and the prelude's) come first, then the builtins, and the program's
        functions last. So a program that defines ``abs`` or ``range``, or redefines a helper
        of the prelude, changes what it computes itself, never what the test computes.
        """
        entry = self.request.get("entry")
        program = {name: _RemoteFunction(self, name) for name in self.program_globals}
        namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": {**program, **vars(builtins)}}

        def on_alarm(signum: int, frame: Any) -> NoReturn:
            raise _Abort(TIMEOUT, f"time limit of {self.time_limit_s:g} s exceeded")

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, max(self._deadline - time.monotonic(), 0.001))
        try:
            if prelude:
                exec(compile(prelude, PRELUDE_FILE, "exec", dont_inherit=True), namespace)
            if entry:
                namespace[entry] = namespace["candidate"] = _RemoteFunction(self, entry)
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
        """Run the request's tests and yield one report frame per test that ran.

        With ``stop_on_failure`` the harness stops only at a failure the program caused and
        knows of (it crashed, ran out of time or memory, flooded its output). Whether an answer
        is right is known on the host alone, and stopping there would tell the program; in
        assert mode even a failed test may be the test code's own comparison, so it never stops.
        """
        if self.mode == "prime":
            tests = list(enumerate(self.request["tests"]))
            # Isolated: each test in a fresh process of its own, as the reference's per-test retries are.
            for group in [[t] for t in tests] if self.request.get("isolate") else [tests]:
                yield from self._prime_guarded(group)
            return
        stop = bool(self.request.get("stop_on_failure")) and self.mode != "assert"
        for index, test in enumerate(self.request["tests"]):
            frame = self._run_guarded(index, test)
            yield frame
            if stop and frame["status"] != OK:
                return

    def _run_guarded(self, index: int, test: dict[str, Any]) -> dict[str, Any]:
        """One test's frame, even when something the program left or sent breaks the harness's
        handling of it: then that test is the program's runtime error, and the next starts afresh."""
        try:
            return self.run(index, test)
        except Exception as exc:  # noqa: BLE001 - the program's doing ends its test, never the harness
            return self._broken_test_frame(index, f"{type(exc).__name__}: {exc}")

    def _prime_guarded(self, group: list[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
        """A prime session whose breakage ends it with the next test as the program's runtime error."""
        last = group[0][0] - 1
        try:
            for frame in self._prime_session(group):
                last = frame["index"]
                yield frame
        except Exception as exc:  # noqa: BLE001 - the program's doing ends its session, never the harness
            if last < group[-1][0]:
                yield self._broken_test_frame(last + 1, f"{type(exc).__name__}: {exc}")

    def _broken_test_frame(self, index: int, reason: str) -> dict[str, Any]:
        for worker in (self.worker, self._spare):
            if worker is not None:
                with contextlib.suppress(Exception):
                    worker.kill()
        self.worker = self._spare = None
        for fd in self._output_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._output_fds = ()
        with contextlib.suppress(Exception):
            if os.getpid() == 1:
                kill_all_but(set())
            self._scrub()
        message = clip_text(f"the harness could not handle what the program did: {reason}", MAX_ERROR_BYTES)
        return {
            "type": "test",
            "index": index,
            "status": RUNTIME_ERROR,
            "wall_time_s": 0.0,
            "stdout": "",
            "stdout_truncated": False,
            "stderr": "",
            "stderr_truncated": False,
            "exit_code": None,
            "signal": None,
            "max_rss_kb": None,
            "cpu_time_s": None,
            "error": {"type": "HarnessError", "message": message, "traceback": ""},
        }

    def _open_test_io(self, stdin: str) -> tuple[int, int, int]:
        self._fresh_workdir()
        stdin_fd = memory_file("stdin", _input_bytes(stdin))
        self._output_fds = (memory_file("stdout"), memory_file("stderr"))
        self._abort = None
        return stdin_fd, *self._output_fds

    def _fresh_workdir(self) -> None:
        # The scrub removed the last one; whatever stands in its place now (the program's
        # process may have put a link there) goes, and a new directory is made.
        if not os.path.isdir(self.root):
            os.mkdir(self.root, 0o700)
            hand_to_program(self.root)
        remove_tree(self.workdir)
        os.mkdir(self.workdir, 0o700)
        hand_to_program(self.workdir)

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
        self._output_fds = ()
        try:
            frame["stdout"], frame["stdout_truncated"] = self._read_capped(out_fd)
            frame["stderr"], frame["stderr_truncated"] = self._read_capped(err_fd)
        finally:
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
                status, error = self._run_assertions(test["code"], str(test.get("prelude") or ""))
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
        problem = _unjudgeable(value)
        if problem is not None:
            return RUNTIME_ERROR, {"type": "UnjudgeableValue", "message": problem, "traceback": ""}, None, {}
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
            for index, _ in group:
                frame = {"type": "test", "index": index}
                started = time.monotonic()
                self._deadline = min(started + self.time_limit_s, session_end)
                observed = self._expect("observed", "exit")
                if observed["op"] == "exit":
                    aborted = {"type": "Aborted", "message": _describe_exit(observed), "traceback": ""}
                    yield self._prime_frame(frame, started, worker, ABORTED, aborted, oom_before)
                    return
                status = str(observed.get("status"))
                if status not in (OK, RUNTIME_ERROR, ABORTED):
                    raise _Abort(RUNTIME_ERROR, "the program broke the harness protocol: bad status")
                error = observed.get("error")
                if status == OK and self.request.get("entry") is not None:
                    problem = _unjudgeable(observed.get("value"))
                    if problem is not None:
                        status, error = RUNTIME_ERROR, {"type": "TypeError", "message": problem, "traceback": ""}
                    elif len(json.dumps(observed.get("value"), separators=(",", ":"))) > self.output_limit:
                        raise _Abort(OUTPUT_LIMIT, "the return value is too large")
                if status == OK:
                    # The captured text is what the reference judges; the fd-level output is context only.
                    frame["captured"] = observed.get("stdout")
                    frame["value"] = observed.get("value")
                ends = status == ABORTED or (status == RUNTIME_ERROR and not keep_going)
                last = ends or index == group[-1][0]
                yield self._prime_frame(frame, started, worker, status, error, oom_before, last=last)
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
            frame["stdout"] = clip_text(captured, self.output_limit)
            frame["stdout_truncated"] = len(frame["stdout"]) < len(captured)
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
        remove_tree(self.root)


def _describe_exit(info: dict[str, Any]) -> str:
    if info.get("signal") is not None:
        return f"killed by signal {info['signal']}"
    return f"process exited with status {info.get('exit_code')}"


def _unjudgeable(value: Any) -> str | None:
    """Why the host could not read ``value`` back (a malformed encoding, nesting too deep), if so."""
    try:
        codec.decode(value)
    except (codec.CodecError, RecursionError) as exc:
        return f"the returned value cannot be judged: {exc}"
    return None


def _grew(before: int | None, after: int | None) -> bool:
    return before is not None and after is not None and after > before


def _int_or_none(value: Any) -> int | None:
    return value if type(value) is int else None


def _float_or_none(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) else None


def _clean_error(error: Any) -> dict[str, str]:
    """Keep only well-typed, bounded fields of an error the worker (untrusted) reported."""
    error = error if isinstance(error, dict) else {}
    return {
        "type": clip_text(str(error.get("type", "")), 200),
        "message": clip_text(str(error.get("message", "")), MAX_ERROR_BYTES),
        "traceback": clip_text(str(error.get("traceback", "")), MAX_ERROR_BYTES, keep_end=True),
    }


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
