"""The process runner: compile once, then one process per test, for any language (standard
library only).

The request names the commands (``process``: the source file's name, the compile command or
none, the run command; in them ``{dir}`` stands for the program's folder and ``{source}`` for
the source file's path); the runner writes the source into the program's folder, compiles
there within ``compile_time_limit_s`` of CPU time (a failure is ``compile_error`` with the compiler's
message), then starts the run command for each test with the test's standard input and
in-memory outputs, in the test's working directory, as the program's user.

The program's folder (its source and what the compiler made) is kept between tests, and the
program runs as a user who could change it: a test could leave state for the next in its own
executable. So the runner notes every kept file's identity after loading (inode, size, and
the change time, which no unprivileged process can set) and, should any differ before a later
test, that test and the rest report the program's runtime error instead of running.
"""

from __future__ import annotations

import fcntl
import os

from .._lean import signal, suppress
from .._typing import TYPE_CHECKING
from ..lockdown import fence_cpu
from ..processes import PROGRAM_ENV, as_program, kill_all_but
from ..protocol import COMPILE_ERROR, MAX_ERROR_BYTES, OK, RUNTIME_ERROR, clip_text
from ..supervisor import Abort, CaseIO, ExitInfo, Outcome
from . import Runner

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence
    from typing import Any

    from ..supervisor import Supervisor


class ProcessRunner(Runner):
    """Script tests of a program that runs as a process of its own."""

    def __init__(self, request: dict[str, Any], supervisor: Supervisor, spec: dict[str, Any] | None = None) -> None:
        super().__init__(request, supervisor)
        spec = spec or request["process"]
        self.source: str = spec["source"]
        self.compile_argv: list[str] | None = spec.get("compile")
        self.run_argv: list[str] = spec["run"]
        self._running: list[int] = []

    def _expand(self, argv: list[str]) -> list[str]:
        workspace = self.supervisor.workspace
        places = {"{dir}": workspace.program_dir, "{source}": os.path.join(workspace.program_dir, self.source)}
        expanded = []
        for part in argv:
            for name, value in places.items():
                part = part.replace(name, value)
            expanded.append(part)
        return expanded

    def load(self) -> Outcome | None:
        failure = self._compile()
        if failure is None:
            for name in os.listdir(self.supervisor.workspace.program_dir):
                self.supervisor.workspace.keep(name)
        return failure

    def _compile(self) -> Outcome | None:
        workspace = self.supervisor.workspace
        workspace.write_program(self.source, self.request["code"])
        workspace.add_program_files(self.request.get("program_files") or {})
        if self.compile_argv is None:
            return None
        # The compiler's HOME and TMPDIR (build caches, temporary objects) are a test's working
        # directory, which the first test then starts without.
        workspace.fresh_workdir()
        io = CaseIO("")
        supervisor = self.supervisor
        supervisor.start_compiling()
        try:
            exit = self._run(self._expand(self.compile_argv), io, cwd=workspace.program_dir)
        except Abort as abort:
            self.close()
            message = f"compiling took too long: {abort}"
            return Outcome(COMPILE_ERROR, {"type": "CompileTimeout", "message": message, "traceback": ""})
        finally:
            stdout, _, stderr, _ = io.read(MAX_ERROR_BYTES)
            io.close()
        if exit.exit_code == 0 and exit.signal is None:
            return None
        message = clip_text((stderr + stdout).strip(), MAX_ERROR_BYTES, keep_end=True)
        return Outcome(COMPILE_ERROR, {"type": "CompileError", "message": message, "traceback": ""}, exit=exit)

    def run_test(self, test: dict[str, Any], io: CaseIO) -> Outcome:
        argv = [*self._expand(self.run_argv), *map(str, test.get("argv", ()))]
        exit = self._run(argv, io, cwd=self.supervisor.workspace.workdir)
        status = OK if exit.exit_code == 0 and exit.signal is None else RUNTIME_ERROR
        return Outcome(status, exit=exit)

    def supervised(self) -> Collection[int]:
        return tuple(self._running)

    def close(self) -> None:
        running, self._running = self._running, []
        if running and os.getpid() == 1:
            kill_all_but(())
        for pid in running:
            with suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        for pid in running:
            with suppress(ChildProcessError):
                os.waitpid(pid, 0)

    def _run(self, argv: list[str], io: CaseIO, *, cwd: str) -> ExitInfo:
        """Start ``argv`` as the program and wait for it within the clock; how it ended."""
        return self.wait(self.spawn(as_program(argv), io.fds, cwd=cwd))

    def spawn(self, argv: list[str], fds: Sequence[int], *, cwd: str) -> int:
        """Start ``argv`` in a session of its own with ``fds`` as its descriptors 0, 1, 2, ...
        (and no others); its pid, which the runner then supervises."""
        workdir = self.supervisor.workspace.workdir
        environment = {**PROGRAM_ENV, "HOME": workdir, "TMPDIR": workdir}
        fence = self.supervisor.clock.fence_s
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child only sets itself up and becomes the program
            try:
                os.setsid()
                fence_cpu(fence)
                os.chdir(cwd)
                # Out of the way first, so that no target number overwrites a source not yet placed;
                # these copies close on exec, the targets stay open.
                placed = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in fds]
                for target, fd in enumerate(placed):
                    os.dup2(fd, target)
                os.execvpe(argv[0], argv, environment)  # noqa: S606 - a fixed argv, no shell
            finally:
                os._exit(127)
        self._running.append(pid)
        self.supervisor.clock.supervised = tuple(self._running)
        return pid

    def wait(self, pid: int) -> ExitInfo:
        """Wait for ``pid`` within the clock; how it ended."""
        clock = self.supervisor.clock
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                self._running.remove(pid)
                clock.supervised = tuple(self._running)
                return ExitInfo.from_wait(status, usage)
            clock.wait(None)
