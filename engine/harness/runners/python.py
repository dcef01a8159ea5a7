"""The Python runner: one fresh interpreter (the worker, ``worker.py``) loads the program once,
then forks a child per test, so every test starts from the same loaded state and imports are
paid once per submission; or, for a request whose tests share a process, runs each test in
itself (standard library only).

The worker is the program's process and nothing it says is trusted: the supervisor keeps the
time and reads the outputs from descriptors it made; return values arrive as data. In assert
mode the trusted test code runs here, in the harness, and calls the program across the process
boundary with plain values.
"""

from __future__ import annotations

import builtins
import os
import sys
import time

from .. import codec
from .._lean import signal, socket, suppress
from .._typing import TYPE_CHECKING
from ..channel import Channel, ChannelClosed, ChannelError, ChannelTimeout
from ..processes import PROGRAM_ENV, PROGRAM_UID, as_program, grew, kill_all_but, oom_kills, reap_orphans, splits_users
from ..protocol import (
    ASSERTION_FAILED,
    COMPILE_ERROR,
    MAX_ERROR_BYTES,
    MEMORY_LIMIT,
    OK,
    PROGRAM_FILE,
    RUNTIME_ERROR,
    TIMEOUT,
    clip_text,
)
from ..supervisor import Abort, ExitInfo, Outcome, clean_error
from ..workspace import memory_file
from . import Runner
from .boundary import ImageLibraries, ProgramObject, RemoteFunction, TrustedObjects, names_used, program_modules

if TYPE_CHECKING:
    from collections.abc import Collection
    from typing import Any, NoReturn

    from ..supervisor import CaseIO, Clock, Supervisor
    from ..workspace import Workspace

TEST_FILE = "<test>"
PRELUDE_FILE = "<prelude>"
# Where a forked worker keeps its control socket: the first descriptor after its stdio.
WORKER_CONTROL_FD = 3


class Worker:
    """One worker process and its control channel.

    The first worker of a container is forked from the harness before the request is read
    (``before_request``): it then holds nothing the request brings, and costs a fork instead of
    an interpreter's start. A worker needed later (a test that ended abnormally took the last one
    with it) is a fresh interpreter, since the harness's memory then holds the request.
    """

    def __init__(self, workspace: Workspace, *, before_request: bool = False) -> None:
        parent_sock, child_sock = socket.socketpair()
        self.channel = Channel(parent_sock)
        package_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
        environment = {**PROGRAM_ENV, "HOME": workspace.workdir, "TMPDIR": workspace.workdir}
        # What the program prints while it loads is not a test's output; only its errors are kept.
        self.load_err = memory_file("load-stderr")
        try:
            if before_request:
                self.pid = _fork_worker(child_sock.fileno(), self.load_err, environment, package_dir)
            else:
                self.pid = _spawn_worker(child_sock.fileno(), self.load_err, environment, package_dir)
        finally:
            child_sock.close()
        self.alive = True

    def load_stderr(self) -> str:
        text = os.pread(self.load_err, MAX_ERROR_BYTES, 0).decode("utf-8", errors="replace")
        return clip_text(text, MAX_ERROR_BYTES)

    def ended(self, clock: Clock) -> ExitInfo:
        """Wait, within ``clock``'s limits, for the worker to end by itself; how it ended."""
        while True:
            pid, status, usage = os.wait4(self.pid, os.WNOHANG)
            if pid:
                self._forget()
                return ExitInfo.from_wait(status, usage)
            clock.wait(None)

    def _forget(self) -> None:
        self.alive = False
        self.channel.close()
        os.close(self.load_err)

    def kill(self) -> None:
        if not self.alive:
            return
        self._forget()
        if os.getpid() == 1:
            kill_all_but(())
        else:
            with suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            with suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
        reap_orphans(())


def _spawn_worker(control_fd: int, load_err: int, environment: dict[str, str], package_dir: str) -> int:
    root_package = __package__.split(".")[0]
    argv = as_program(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path.insert(0, {package_dir!r}); "
            f"from {root_package}.worker import main; main({control_fd}, {package_dir!r})",
        ]
    )
    os.set_inheritable(control_fd, True)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        return os.posix_spawn(
            argv[0],
            argv,
            environment,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, devnull, 0),
                (os.POSIX_SPAWN_DUP2, devnull, 1),
                (os.POSIX_SPAWN_DUP2, load_err, 2),
            ],
            setsid=True,
        )
    finally:
        os.close(devnull)


def _fork_worker(control_fd: int, load_err: int, environment: dict[str, str], package_dir: str) -> int:
    """A worker forked from this process, which must not yet hold anything of the request."""
    other_user = splits_users()
    pid = os.fork()
    if pid:
        return pid
    status = 1
    try:
        _become_worker(control_fd, load_err, environment, other_user)
        from ..worker import main

        main(WORKER_CONTROL_FD, package_dir)
        status = 0
    except BaseException:  # noqa: BLE001 - what a fresh interpreter would print, then its status
        import traceback

        with suppress(Exception):
            os.write(2, traceback.format_exc().encode("utf-8", "replace"))
    finally:
        os._exit(status)


def _become_worker(control_fd: int, load_err: int, environment: dict[str, str], other_user: bool) -> None:
    """Turn a fork of the harness into what ``_spawn_worker`` starts: the program's user, its
    environment, its own session, and none of the harness's descriptors (its stdin still holds
    the request unread, its copy of stdout is the report)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    devnull = os.open(os.devnull, os.O_RDWR)
    for target, fd in ((0, devnull), (1, devnull), (2, load_err), (WORKER_CONTROL_FD, control_fd)):
        os.dup2(fd, target)
    os.closerange(WORKER_CONTROL_FD + 1, os.sysconf("SC_OPEN_MAX"))
    os.setsid()
    if other_user:
        os.setgroups([])
        os.setresgid(PROGRAM_UID, PROGRAM_UID, PROGRAM_UID)
        os.setresuid(PROGRAM_UID, PROGRAM_UID, PROGRAM_UID)
    os.environ.clear()
    os.environ.update(environment)
    # The harness starts without ``site`` (-S); a program expects its packages and builtins.
    import site

    site.main()


class PythonRunner(Runner):
    """Script, call and assert tests of a Python program, each a fork of one loaded worker."""

    def __init__(self, request: dict[str, Any], supervisor: Supervisor, spare: Worker | None = None) -> None:
        super().__init__(request, supervisor)
        self.mode: str = request["mode"]
        self.entry: str | None = request.get("entry")
        # The tests run in the worker itself, one after another.
        self.in_place = bool(request.get("shared_process"))
        self.worker: Worker | None = None
        # A worker started before the request arrived, already past its interpreter's start.
        self._spare = spare
        self.program_globals: list[str] = []
        self.program_modules: dict[str, str] = {}
        self._objects: TrustedObjects | None = None
        self._abort: Abort | None = None

    # -- the worker -------------------------------------------------------------------------------

    def load(self) -> Outcome | None:
        self.supervisor.workspace.write_program(PROGRAM_FILE, self.request["code"])
        self.supervisor.workspace.add_program_files(self.request.get("program_files") or {})
        return None

    def supervised(self) -> Collection[int]:
        return (self.worker.pid,) if self.worker is not None and self.worker.alive else ()

    def close(self) -> None:
        for worker in (self.worker, self._spare):
            if worker is not None:
                worker.kill()
        self.worker = self._spare = None

    def _load_message(self) -> dict[str, Any]:
        workspace = self.supervisor.workspace
        return {
            "op": "load",
            "mode": self.mode,
            "code": self.request["code"],
            "path": os.path.join(workspace.program_dir, PROGRAM_FILE),
            "entry": self.entry,
            "workdir": workspace.program_dir,
            "in_place": self.in_place,
        }

    def _start_worker(self) -> Outcome | None:
        """Load the program into a worker; the failure that every test then reports, if any."""
        supervisor = self.supervisor
        oom_before = oom_kills()
        worker, self._spare = self._spare or Worker(supervisor.workspace), None
        supervisor.start_compiling()
        supervisor.clock.supervised = (worker.pid,)
        try:
            worker.channel.send(self._load_message())
            supervisor.clock.wait(worker.channel.fileno())
            reply = worker.channel.recv(deadline=supervisor.clock.deadline)
            if reply.get("op") != "loaded":
                raise ChannelError("expected 'loaded'")
        except (Abort, ChannelTimeout) as exc:
            worker.kill()
            why = exc if isinstance(exc, Abort) else supervisor.clock.timeout()
            error = {"type": "Timeout", "message": f"loading the program took too long: {why}", "traceback": ""}
            return Outcome(TIMEOUT, error)
        except (ChannelClosed, ChannelError, OSError) as exc:
            stderr = worker.load_stderr()
            worker.kill()
            message = f"the program broke off while loading: {exc}"
            status = MEMORY_LIMIT if grew(oom_before, oom_kills()) else RUNTIME_ERROR
            return Outcome(status, {"type": "WorkerLost", "message": message, "traceback": stderr})
        if not reply.get("ok"):
            worker.kill()
            # A program that does not parse, or lacks the function to call, never ran: a compile error.
            stage = reply.get("stage")
            status = COMPILE_ERROR if stage in ("compile", "entry") else RUNTIME_ERROR
            if self.mode == "script" and stage == "compile":
                # As `python3 main.py` would: exit status 1, the traceback on stderr.
                error = clean_error(reply.get("error"))
                return Outcome(status, error, exit=ExitInfo(exit_code=1), stderr=error["traceback"])
            return Outcome(status, clean_error(reply.get("error")))
        names = reply.get("globals", [])
        self.program_globals = [n for n in names if isinstance(n, str) and n.isidentifier()]
        modules = reply.get("modules")
        self.program_modules = {
            name: module
            for name, module in (modules.items() if isinstance(modules, dict) else ())
            if isinstance(name, str) and name.isidentifier() and isinstance(module, str)
        }
        self.worker = worker
        return None

    def ready(self) -> Outcome | None:
        # A test that ended abnormally took the worker with it: the next one gets a fresh load.
        if self.worker is not None and self.worker.alive:
            return None
        return self._start_worker()

    def expect(self, *ops: str) -> dict[str, Any]:
        """The worker's next message, within the test's time and output limits."""
        assert self.worker is not None
        channel = self.worker.channel
        clock = self.supervisor.clock
        clock.wait(channel.fileno())
        try:
            message = channel.recv(deadline=clock.deadline)
            for fd in channel.fds:  # never accept descriptors from the program's side
                os.close(fd)
        except ChannelTimeout:
            raise clock.timeout() from None
        except ChannelClosed:
            if self.in_place and "exit" in ops:
                # The test's process was the worker: its end is the test's.
                return self._exit_message(self.worker.ended(clock))
            raise Abort(RUNTIME_ERROR, "the program's process ended unexpectedly") from None
        except ChannelError as exc:
            raise Abort(RUNTIME_ERROR, f"the program broke the harness protocol: {exc}") from None
        if message["op"] not in ops:
            raise Abort(RUNTIME_ERROR, f"the program broke the harness protocol: expected {' or '.join(ops)}")
        return message

    @staticmethod
    def _exit_message(exit: ExitInfo) -> dict[str, Any]:
        return {"op": "exit", "exit_code": exit.exit_code, "signal": exit.signal, "peak_memory_kb": exit.peak_memory_kb}

    # -- one test ---------------------------------------------------------------------------------

    def run_test(self, test: dict[str, Any], io: CaseIO) -> Outcome:
        worker = self.worker
        assert worker is not None
        message: dict[str, Any] = {
            "op": "test",
            "cwd": self.supervisor.workspace.workdir,
            "cpu_fence_s": self.supervisor.clock.fence_s,
        }
        if self.mode == "call":
            message["args"] = test["args"]
        elif self.mode == "script":
            message["argv"] = [str(part) for part in test.get("argv", ())]
        self._abort = None
        worker.channel.send(message, fds=io.fds)
        if self.mode == "call":
            return self._call_outcome()
        if self.mode == "assert":
            self.expect("ready")
            status, error = self._run_assertions(str(test["code"]), str(test.get("prelude") or ""))
            if self._abort is not None:
                raise self._abort
            worker.channel.send({"op": "end"})
            return Outcome(status, error, exit=ExitInfo.reported(self.expect("exit")))
        exit = ExitInfo.reported(self.expect("exit"))
        status = OK if exit.exit_code == 0 and exit.signal is None else RUNTIME_ERROR
        return Outcome(status, exit=exit)

    def _call_outcome(self) -> Outcome:
        result = self.expect("result", "exit")
        if result["op"] == "exit":
            exit = ExitInfo.reported(result)
            error = {"type": "NoResult", "message": f"the function did not return ({exit.describe()})", "traceback": ""}
            return Outcome(RUNTIME_ERROR, error, exit=exit)
        if not result.get("ok"):
            outcome = Outcome(RUNTIME_ERROR, clean_error(result.get("error")))
        else:
            outcome = self.value_outcome(result.get("value"))
        outcome.exit = ExitInfo.reported(self.expect("exit"))
        return outcome

    # -- assert mode ------------------------------------------------------------------------------

    def remote_call(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], target: ProgramObject | None = None
    ) -> Any:
        if self._abort is not None:
            raise self._abort
        assert self.worker is not None and self._objects is not None
        objects = self._objects
        try:
            payload = {
                "op": "call",
                "name": name,
                "args": codec.encode(list(args), objects),
                "kwargs": codec.encode(kwargs, objects),
            }
        except codec.CodecError as exc:
            raise TypeError(f"cannot pass this argument to the program: {exc}") from None
        if target is not None:
            payload["target"] = target._handle
        try:
            self.worker.channel.send(payload)
            reply = self.expect("reply")
            if reply.get("ok"):
                if target is not None:
                    objects.refresh(target, reply.get("target"))
                return codec.decode(reply.get("value"), objects=objects)
        except Abort as abort:
            self._abort = abort
            raise
        except (OSError, codec.CodecError, RecursionError) as exc:
            self._abort = Abort(RUNTIME_ERROR, f"the program broke the harness protocol: {exc}")
            raise self._abort from None
        raise _remote_exception(clean_error(reply.get("error")))

    def _run_assertions(self, test_code: str, prelude: str) -> tuple[str, dict[str, str] | None]:
        """Run trusted test code against the program.

        The test code resolves a name through the program only when nothing else defines it:
        its own names (and the prelude's) come first, then the builtins, and the program's
        functions last. So a program that defines ``abs`` or ``range``, or redefines a helper
        of the prelude, changes what it computes itself, never what the test computes. What
        crosses, and how, is ``boundary``'s.
        """
        clock = self.supervisor.clock
        ImageLibraries.install()
        program: dict[str, Any] = {name: RemoteFunction(self, name) for name in self.program_globals}
        namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": program}
        self._objects = TrustedObjects(self, namespace)

        def on_alarm(signum: int, frame: Any) -> NoReturn:
            raise clock.timeout()

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, max(clock.deadline - time.monotonic(), 0.001))
        try:
            compiled_prelude = compile(prelude, PRELUDE_FILE, "exec", dont_inherit=True)
            compiled_test = compile(test_code, TEST_FILE, "exec", dont_inherit=True)
            program.update(program_modules(self.program_modules, names_used(compiled_prelude, compiled_test)))
            program.update(vars(builtins))
            exec(compiled_prelude, namespace)
            if self.entry:
                namespace[self.entry] = namespace["candidate"] = RemoteFunction(self, self.entry)
            exec(compiled_test, namespace)
            status, error = OK, None
        except Abort as abort:
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
            return self._abort.status, self._abort.error()
        return status, error


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
