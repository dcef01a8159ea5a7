"""Language-neutral supervision of a request's tests (standard library only).

The supervisor knows nothing of the language the program is written in: a runner (see
``runners``) starts the program for each test. What every test gets from here is the same: its
standard input and its outputs in anonymous in-memory files, an empty working directory, a
clock that ends it at its time limit or its output limit, processes it left behind killed,
orphans reaped while it runs, everything it wrote removed afterwards, the kernel's OOM count
read, and one report frame.
"""

from __future__ import annotations

import math
import os
import select
import time

from ._lean import dumps, signal, suppress
from ._typing import TYPE_CHECKING
from .conversation import Conversation, HostFeed
from .processes import ChildWakeup, CpuMeter, grew, kill_all_but, oom_kills, reap_orphans
from .protocol import (
    FRAME_ESCAPE_FACTOR,
    HEARTBEAT_S,
    MAX_ERROR_BYTES,
    MEMORY_LIMIT,
    OK,
    OUTPUT_LIMIT,
    RUNTIME_ERROR,
    STARVED_ALLOWANCE,
    TIMEOUT,
    clip_text,
)
from .workspace import Workspace, input_bytes, memory_file

if TYPE_CHECKING:
    from collections.abc import Callable, Collection
    from typing import Any

# How often a running test's output files are measured against the output limit.
TICK_S = 0.02


class Abort(BaseException):
    """Ends a test early; ``status`` says why."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status

    def error(self) -> dict[str, str]:
        return {"type": "Abort", "message": str(self), "traceback": ""}


class ExitInfo:
    """How a test's process ended, and what it used."""

    __slots__ = ("cpu_time_s", "exit_code", "peak_memory_kb", "signal")

    def __init__(
        self,
        exit_code: int | None = None,
        signal: int | None = None,
        cpu_time_s: float | None = None,
        peak_memory_kb: int | None = None,
    ) -> None:
        self.exit_code = exit_code
        self.signal = signal
        self.cpu_time_s = cpu_time_s
        self.peak_memory_kb = peak_memory_kb

    @classmethod
    def from_wait(cls, status: int, usage: Any) -> ExitInfo:
        return cls(
            exit_code=os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None,
            signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            cpu_time_s=round(usage.ru_utime + usage.ru_stime, 6),
            peak_memory_kb=usage.ru_maxrss,
        )

    @classmethod
    def reported(cls, message: dict[str, Any]) -> ExitInfo:
        """From a record the program's side sent: only well-typed numbers are kept."""
        return cls(
            exit_code=_int_or_none(message.get("exit_code")),
            signal=_int_or_none(message.get("signal")),
            cpu_time_s=_float_or_none(message.get("cpu_time_s")),
            peak_memory_kb=_int_or_none(message.get("peak_memory_kb")),
        )

    def describe(self) -> str:
        if self.signal is not None:
            return f"killed by signal {self.signal}"
        return f"process exited with status {self.exit_code}"


class Outcome:
    """What a runner observed of one test. ``stdout`` and ``stderr``, when given, replace what the
    test wrote to its descriptors: the output captured inside the process (the prime mode), the
    traceback of a script that does not compile."""

    __slots__ = ("error", "exit", "status", "stderr", "stdout", "value")

    _NO_VALUE = object()

    def __init__(
        self,
        status: str = OK,
        error: dict[str, str] | None = None,
        *,
        value: Any = _NO_VALUE,
        exit: ExitInfo | None = None,
        stdout: str | None = None,
        stderr: str | None = None,
    ) -> None:
        self.status = status
        self.error = error
        self.value = value
        self.exit = exit or ExitInfo()
        self.stdout = stdout
        self.stderr = stderr

    @property
    def has_value(self) -> bool:
        return self.value is not Outcome._NO_VALUE


class CaseIO:
    """One test's standard input and outputs: anonymous in-memory files the harness created, so
    nothing the program does can swap, fill or replace them. In a conversation (an interactive
    test) the program's stdin and stdout are its pipes instead, and ``stdout`` holds what the
    program wrote to them."""

    def __init__(self, stdin: str, converse: Callable[[int], Conversation] | None = None) -> None:
        self.stdin = memory_file("stdin", input_bytes(stdin))
        self.stdout = memory_file("stdout")
        self.stderr = memory_file("stderr")
        self.conversation = converse(self.stdout) if converse is not None else None

    @property
    def fds(self) -> tuple[int, int, int]:
        if self.conversation is not None:
            return (*self.conversation.program_fds, self.stderr)
        return self.stdin, self.stdout, self.stderr

    def flooded(self, limit: int) -> bool:
        return any(os.fstat(fd).st_size > limit for fd in (self.stdout, self.stderr))

    def read(self, limit: int) -> tuple[str, bool, str, bool]:
        """stdout and stderr, each cut at ``limit`` bytes, and whether it was cut."""
        texts = []
        for fd in (self.stdout, self.stderr):
            data = os.pread(fd, limit + 1, 0)
            texts += [data[:limit].decode("utf-8", errors="replace"), len(data) > limit]
        return texts[0], texts[1], texts[2], texts[3]  # type: ignore[return-value]

    def close(self) -> None:
        if self.conversation is not None:
            self.conversation.finish()
        for fd in (self.stdin, self.stdout, self.stderr):
            with suppress(OSError):
                os.close(fd)


class Clock:
    """Waits for a runner's events while a step's limits hold: its CPU time (everything the
    program runs, measured by ``meter``), the wall-clock backstop for a program that sleeps or
    blocks, and its output; reaping the orphans the step leaves (all but the runner's
    ``supervised`` processes)."""

    def __init__(
        self, wakeup: ChildWakeup | None, meter: CpuMeter | None = None, beat: Callable[[], None] = lambda: None
    ) -> None:
        self._wakeup = wakeup
        self._beat = beat
        self.meter = meter or CpuMeter()
        # The sandbox's CPU quota in cores.
        self.cores = math.inf
        self.deadline = 0.0
        self.cpu_limit_s = 0.0
        self.wall_limit_s = 0.0
        self._cap: float | None = None
        self._given_back = 0.0
        # When this process last saw the step still going. Its own waits are no time of the
        # program's (a program that sleeps past the backstop sleeps on while this process waits
        # for a CPU), but an end it finds past the deadline, having last looked before the
        # deadline, may have come while it could not look: that is not the program's lateness.
        self._looked = 0.0
        self._graced = False
        self._io: CaseIO | None = None
        self._output_limit = 0
        self.supervised: Collection[int] = ()

    def start(
        self, cpu_limit_s: float, wall_limit_s: float, io: CaseIO | None, output_limit: int, cap: float | None = None
    ) -> float:
        """Start timing a step of ``cpu_limit_s`` of CPU time within ``wall_limit_s`` (ending no
        later than ``cap``); return its start."""
        started = time.monotonic()
        self.cpu_limit_s = cpu_limit_s
        self.wall_limit_s = wall_limit_s
        self.deadline = started + wall_limit_s if cap is None else min(started + wall_limit_s, cap)
        self._cap = cap
        self._given_back = 0.0
        self._looked = started
        self._graced = False
        self._io = io
        self._output_limit = output_limit
        self.meter.start(self.cores, self.supervised, harness_too=io is not None and io.conversation is not None)
        return started

    def _give_back_waits(self) -> bool:
        """At the deadline: move it by the time the machine kept the program waiting since the
        last move, and a tick at a time while the program is awake (a wait is counted only when
        it ends: else a program that reads a slow disk would be ended in the middle of a read;
        its CPU time has its own limit): the backstop ends a program that sleeps. Whether it
        moved."""
        kept, waiting = self.meter.kept_waiting()
        if waiting:
            kept = max(kept, self._given_back + time.monotonic() - self.deadline + TICK_S)
        given_back = min(kept, STARVED_ALLOWANCE * self.wall_limit_s)
        extra = given_back - self._given_back
        if extra < TICK_S / 2:
            return False
        self._given_back = given_back
        self.deadline += extra
        if self._cap is not None:
            self.deadline = min(self.deadline, self._cap)
        return self.deadline > time.monotonic()

    def extend(self, seconds: float) -> None:
        """Let the step go on for ``seconds`` more of wall-clock time, its CPU still counted."""
        self.deadline = time.monotonic() + seconds

    @property
    def fence_s(self) -> int:
        """A per-process CPU limit (RLIMIT_CPU) just past the step's: the kernel's fence, should
        this process be kept from running while the program runs."""
        return int(self.cpu_limit_s) + 2

    def over_cpu(self, used: float) -> Abort | None:
        if used > self.cpu_limit_s:
            return Abort(TIMEOUT, f"the CPU time limit of {self.cpu_limit_s:g} s was exceeded ({used:.2f} s used)")
        return None

    def fenced(self, used: float) -> Abort:
        """The step's end by the kernel's fence (``SIGXCPU``) before the meter read its limit
        passed. The fence counts each process's own time, which gVisor inflates (a thread held
        back by the quota counts as running), while no reading of the meter may pass the quota:
        a busy program of many threads can meet the fence first."""
        return Abort(
            TIMEOUT,
            f"the CPU time limit of {self.cpu_limit_s:g} s was exceeded by the kernel's own count, whose "
            f"per-process fence of {self.fence_s} s ended the program ({used:.2f} s measured)",
        )

    def timeout(self) -> Abort:
        """The step's end at its deadline: past its CPU time, or at the wall-clock backstop."""
        used = self.meter.used()
        given_back = f" and {self._given_back:.1f} s given back for a busy machine's waits" if self._given_back else ""
        return self.over_cpu(used) or Abort(
            TIMEOUT,
            f"the wall-clock backstop of {self.wall_limit_s:g} s{given_back} was reached with {used:.2f} s of CPU "
            "time used (the program slept or waited)",
        )

    def wait(self, fd: int | None) -> None:
        """Return when ``fd`` is readable (or, with no ``fd``, when a child has exited); raise
        :class:`Abort` at the deadline or when the test's output passes its limit."""
        watched = [] if fd is None else [(fd, select.POLLIN)]
        if self._wakeup is not None:
            watched.append((self._wakeup.fd, select.POLLIN))
        conversation = self._io.conversation if self._io is not None else None
        poller = _poller(watched)
        while True:
            late = time.monotonic() >= self.deadline and not self._give_back_waits()
            if late and (self._looked >= self.deadline or self._graced):
                raise self.timeout()
            if self.meter.past(self.cpu_limit_s):
                raise self.timeout()
            if conversation is not None:
                # What it watches changes as bytes move (stdin to write only while some wait).
                poller = _poller([*watched, *conversation.watched()])
            # Past the deadline, having last looked before it: one look more, a tick long (see
            # ``_looked``), once a step.
            remaining = self.deadline - time.monotonic()
            events = poller.poll((TICK_S if late else min(TICK_S, max(remaining, 0.0))) * 1000)
            if not late:
                self._looked = time.monotonic()
            if conversation is not None:
                conversation.serve({ready for ready, _ in events})
            self._beat()
            woken = self._wakeup is not None and any(ready == self._wakeup.fd for ready, _ in events)
            if woken:
                assert self._wakeup is not None
                self._wakeup.drain()
                reap_orphans(self.supervised)
            if self._io is not None and self._io.flooded(self._output_limit):
                raise Abort(OUTPUT_LIMIT, f"output exceeded {self._output_limit} bytes")
            if conversation is not None and conversation.sent_bytes > FRAME_ESCAPE_FACTOR * self._output_limit:
                # Many tiny writes: each is a frame of its own, which the report's budget counts.
                raise Abort(
                    OUTPUT_LIMIT, f"output in writes this small exceeded the report's {self._output_limit} bytes"
                )
            if any(ready == fd for ready, _ in events) or (fd is None and woken):
                if late:
                    self._graced = True
                    self.extend(TICK_S)
                return
            if late:
                raise self.timeout()


def _poller(watched: list[tuple[int, int]]) -> select.poll:
    # poll, not select: Debian's gVisor refuses pselect6 under an OCI profile.
    poller = select.poll()
    for fd, events in watched:
        poller.register(fd, events)
    return poller


class Frames:
    """The result channel: a private copy of the original stdout."""

    def __init__(self) -> None:
        self._fd = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 1)
        os.close(devnull)
        self._written = time.monotonic()

    def emit(self, frame: dict[str, Any]) -> None:
        data = (dumps(frame) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self._written = time.monotonic()

    def beat(self) -> None:
        """Tell the host this harness still runs, when it has not heard from it for a while."""
        if time.monotonic() - self._written >= HEARTBEAT_S:
            self.emit({"type": "alive"})


class Supervisor:
    """What every test gets, whatever runs it: its files, its clock, its clean-up, its frame."""

    def __init__(
        self,
        request: dict[str, Any],
        workspace: Workspace,
        wakeup: ChildWakeup | None,
        frames: Frames | None = None,
        feed: HostFeed | None = None,
    ) -> None:
        self.request = request
        self.workspace = workspace
        self.frames = frames
        # An interactive request's live stdin (see ``conversation``).
        self.feed = feed
        self.time_limit_s = float(request["time_limit_s"])
        self.wall_limit_s = float(request["wall_limit_s"])
        self.output_limit = int(request["output_limit_bytes"])
        self.clock = Clock(wakeup, beat=frames.beat if frames is not None else lambda: None)
        self.clock.cores = float(request.get("cpus") or math.inf)
        # Whether the clock runs for a test (not for loading the program): its time is the test's.
        self._timing_a_test = False
        # Inside the sandbox the harness is PID 1: every other process and writable place is the program's.
        self.owns_sandbox = os.getpid() == 1

    def open_io(self, stdin: str, files: dict[str, str] | None = None, index: int | None = None) -> CaseIO:
        """A test's standard input and outputs, in a fresh working directory that holds ``files``;
        in an interactive request, test ``index``'s conversation."""
        self.workspace.fresh_workdir()
        self.workspace.place_files(files or {})
        feed, frames = self.feed, self.frames
        if feed is None or frames is None or index is None:
            return CaseIO(stdin)
        return CaseIO(stdin, lambda transcript: Conversation(index, feed, frames.emit, transcript))

    def start(self, io: CaseIO | None, *, cap: float | None = None) -> float:
        """Start a test's clock; return its start (a ``time.monotonic()`` value)."""
        self._timing_a_test = True
        return self.clock.start(self.time_limit_s, self.wall_limit_s, io, self.output_limit, cap)

    def start_compiling(self) -> None:
        """Start the clock of loading or compiling the program."""
        limits = (float(self.request["compile_time_limit_s"]), float(self.request["compile_wall_limit_s"]))
        self._timing_a_test = False
        self.clock.start(*limits, None, self.output_limit)

    def finish(
        self,
        index: int,
        io: CaseIO | None,
        outcome: Outcome,
        started: float,
        oom_before: int | None,
        keep: Collection[int],
    ) -> dict[str, Any]:
        """Stop what the test left running (but ``keep``), read its output, clean up after it,
        and write its frame."""
        wall_time_s = round(time.monotonic() - started, 6)
        if io is None:
            stdout, stdout_cut, stderr, stderr_cut = "", False, "", False
        else:
            if self.owns_sandbox:
                kill_all_but(keep)
            try:
                if io.conversation is not None:
                    # What the program wrote last goes out before the test's frame.
                    io.conversation.finish()
                stdout, stdout_cut, stderr, stderr_cut = io.read(self.output_limit)
                if io.conversation is not None:
                    stdout = ""  # the host has it already, from the data frames
            finally:
                io.close()
            self.workspace.scrub(everything_writable=self.owns_sandbox)
        if outcome.stdout is not None:
            stdout = clip_text(outcome.stdout, self.output_limit)
            stdout_cut = len(stdout) < len(outcome.stdout)
        if outcome.stderr is not None:
            stderr = outcome.stderr
        status, error = outcome.status, outcome.error
        # A test that never ran (its program failed to load) used nothing of its own.
        cpu_time_s = round(self.clock.meter.used(), 6) if self._timing_a_test else None
        past_cpu = self.clock.over_cpu(cpu_time_s) if cpu_time_s is not None else None
        # The kernel's OOM kill outranks everything, then time past the CPU limit (however the
        # program ended: the kernel's fence ends it just past it), then an output flood, then
        # what was observed.
        if grew(oom_before, oom_kills()):
            status = MEMORY_LIMIT
        elif past_cpu is not None:
            status, error = TIMEOUT, past_cpu.error()
        elif outcome.exit.signal == signal.SIGXCPU and cpu_time_s is not None:
            status, error = TIMEOUT, self.clock.fenced(cpu_time_s).error()
        elif status != TIMEOUT and (stdout_cut or stderr_cut):
            status = OUTPUT_LIMIT
        frame: dict[str, Any] = {
            "type": "test",
            "index": index,
            "status": status,
            "exit_code": outcome.exit.exit_code,
            "signal": outcome.exit.signal,
            "stdout": stdout,
            "stdout_truncated": stdout_cut,
            "stderr": stderr,
            "stderr_truncated": stderr_cut,
            "usage": {
                "wall_time_s": wall_time_s,
                "cpu_time_s": cpu_time_s,
                "peak_memory_kb": outcome.exit.peak_memory_kb,
            },
            "error": clean_error(error) if error is not None else None,
        }
        if status == OK and outcome.has_value:
            frame["value"] = outcome.value
        return frame

    def broken(self, index: int, reason: str) -> dict[str, Any]:
        """The frame of a test whose handling broke on something the program left or sent: the
        program's runtime error. Everything of the test is killed and removed."""
        if self.owns_sandbox:
            with suppress(Exception):
                kill_all_but(())
        with suppress(Exception):
            self.workspace.scrub(everything_writable=self.owns_sandbox)
        message = f"the harness could not handle what the program did: {reason}"
        outcome = Outcome(RUNTIME_ERROR, {"type": "HarnessError", "message": message, "traceback": ""})
        return self.finish(index, None, outcome, time.monotonic(), None, ())


def clean_error(error: Any) -> dict[str, str]:
    """Keep only well-typed, bounded fields of an error the program's side reported."""
    error = error if isinstance(error, dict) else {}
    return {
        "type": clip_text(str(error.get("type", "")), 200),
        "message": clip_text(str(error.get("message", "")), MAX_ERROR_BYTES),
        "traceback": clip_text(str(error.get("traceback", "")), MAX_ERROR_BYTES, keep_end=True),
    }


def _int_or_none(value: Any) -> int | None:
    return value if type(value) is int else None


def _float_or_none(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) else None
