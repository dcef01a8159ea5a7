"""Processes in the sandbox: whom the program runs as, killing what a test leaves running,
reaping orphans, and the kernel's OOM counter (standard library only)."""

from __future__ import annotations

import math
import os
import resource
import time

from ._lean import signal, suppress
from ._typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Collection

# The user programs run as. When the harness itself starts as root (it does under gVisor, whose
# root is not the host's), this difference in uid is what keeps the program away from it.
PROGRAM_UID = int(os.environ.get("AIRLOCK_SANDBOX_UID", "65534"))
SETPRIV = "/usr/bin/setpriv"
PROGRAM_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    # One thread per numeric library: the pids limit counts threads, and the CPU quota is shared.
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def splits_users() -> bool:
    """Whether the program runs as another user than the harness: when the harness is a sandbox's
    PID 1 started as root (under gVisor). A harness run by hand keeps one user."""
    return os.getpid() == 1 and os.geteuid() == 0


def as_program(argv: list[str]) -> list[str]:
    """``argv`` run as the program's user."""
    if splits_users():
        return [SETPRIV, f"--reuid={PROGRAM_UID}", f"--regid={PROGRAM_UID}", "--clear-groups", "--", *argv]
    return argv


def hand_to_program(path: str) -> None:
    """Let the program's user own ``path`` when it is not the harness's user."""
    if splits_users():
        os.chown(path, PROGRAM_UID, PROGRAM_UID, follow_symlinks=False)


def read_small(path: str) -> str:
    """A small file's text (one of ``/proc``'s, read at every test: without a file object, a
    third of the time)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 1 << 16).decode()
    finally:
        os.close(fd)


# The sandbox's cgroup files that the harness reads for every test, each opened once (-1: not
# there). A read from offset 0 shows the value of that moment: 1 us, where an open costs 15.
_counters: dict[str, int] = {}


def _read_counter(path: str) -> str:
    """The current text of a cgroup file of the sandbox's.

    :raises OSError: there is no such file (gVisor keeps no cgroup files; a harness run by hand).
    """
    fd = _counters.get(path)
    if fd is None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            fd = -1
        _counters[path] = fd
    if fd < 0:
        raise FileNotFoundError(path)
    return os.pread(fd, 4096, 0).decode()


def _counter_value(path: str, key: str | None) -> int:
    """A cgroup file's number, or its line ``key``'s."""
    text = _read_counter(path)
    if key is None:
        return int(text)
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    raise ValueError(f"{key} is not in {path}")


def oom_kills() -> int | None:
    """The memory cgroup's OOM-kill counter (cgroup v1 or v2), if visible."""
    for path in ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"):
        try:
            return _counter_value(path, "oom_kill")
        except (OSError, ValueError):
            continue
    return None


def none_but(known: Collection[int]) -> bool:
    """Whether the sandbox holds no process but the harness (its PID 1) and ``known``, each of
    one thread: told by the pids cgroup's count of tasks, zombies included, instead of a walk
    through /proc. A count it cannot read, or any other, answers no (then /proc is walked)."""
    if os.getpid() != 1:
        return False
    for path in ("/sys/fs/cgroup/pids/pids.current", "/sys/fs/cgroup/pids.current"):
        try:
            return _counter_value(path, None) == 1 + len(known) and all(_exists(pid) for pid in known)
        except (OSError, ValueError):
            continue
    return False


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's (under gVisor the program runs as one)
        pass
    return True


def grew(before: int | None, after: int | None) -> bool:
    return before is not None and after is not None and after > before


def _state_and_parent(pid: int) -> tuple[str, int] | None:
    try:
        fields = read_small(f"/proc/{pid}/stat").rpartition(")")[2].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def _other_pids(keep: Collection[int]) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != 1 and int(p) not in keep]


def reap_orphans(supervised: Collection[int]) -> None:
    """Reap every exited child but those in ``supervised``, whose wait status belongs to a runner.

    As a namespace's init the harness inherits every process a test orphaned (a double fork);
    each that exits stays a zombie, holding a slot of the pids limit, until it is reaped here.
    """
    while True:
        try:
            # WNOWAIT: look at the next exited child without taking its status.
            found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if found is None:
            return
        if found.si_pid not in supervised:
            with suppress(ChildProcessError):
                os.waitpid(found.si_pid, 0)
            continue
        # A supervised process is first in line: reap the others by name, leaving it be.
        me = os.getpid()
        for pid in _other_pids(supervised):
            state = _state_and_parent(pid)
            if state is not None and state == ("Z", me):
                with suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        return


def kill_all_but(keep: Collection[int]) -> None:
    """As PID 1, SIGKILL every other process in the namespace except ``keep``, and reap them.

    Killed processes die asynchronously and their orphans come back to us as zombies, so this
    loops until nothing is left but ``keep`` (and zombies ``keep`` itself has yet to reap).
    """
    if none_but(keep):
        return
    for _ in range(500):
        reap_orphans(keep)
        left = False
        for pid in _other_pids(keep):
            found = _state_and_parent(pid)
            if found is None or (found[0] == "Z" and found[1] in keep):
                continue
            left = True
            if found[0] != "Z":
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if not left:
            return
        time.sleep(0.001)


class ChildWakeup:
    """A descriptor that turns readable when a child exits (SIGCHLD), for poll loops.

    A pidfd would do for one child, but gVisor has none; a signal's wakeup descriptor works
    everywhere and also tells when an orphan needs reaping.
    """

    def __init__(self) -> None:
        self.fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        os.set_blocking(write_fd, False)
        signal.signal(signal.SIGCHLD, _ignore)
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)

    def drain(self) -> None:
        with suppress(BlockingIOError):
            while os.read(self.fd, 4096):
                pass


def _ignore(signum: int, frame: object) -> None:
    """A handler, so that SIGCHLD is delivered (and wakes the poll) instead of discarded."""


# The container's own CPU counter (its cgroup, which a cgroup namespace shows as the root): every
# process and thread of the sandbox, whatever it does, in nanoseconds (v1) or microseconds (v2).
CGROUP_CPU = (
    ("/sys/fs/cgroup/cpuacct/cpuacct.usage", None, 1e-9),
    ("/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage", None, 1e-9),
    ("/sys/fs/cgroup/cpu.stat", "usage_usec", 1e-6),
)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# A process in these states is not asleep: running or waiting for a CPU, or waiting in the kernel.
AWAKE = ("R", "D")


def _cgroup_seconds(path: str, key: str | None, unit: float) -> float:
    return _counter_value(path, key) * unit


def _own_seconds() -> float:
    # Not os.times(): it counts in clock ticks (10 ms), which the cgroup's counter does not.
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuMeter:
    """The CPU seconds the program used since :meth:`start`: all its processes and threads, the
    ones that ended and the ones it left running; nothing of the harness's (``trust`` leaves out
    processes of ours, such as a JavaScript test process, whose time is not the program's).

    Inside the sandbox it reads the container's cgroup counter, which no process of the
    sandbox can leave, less the harness's own time. Where there is none to read (gVisor keeps
    its own; a harness run by hand), it adds up the processes below the harness from ``/proc``
    (each one's time and its reaped children's) and the harness's reaped children: a process
    reaped between two reads of one pass can be counted twice in that pass, so a limit is only
    taken as passed when two passes say so (``past``); once the test's processes are gone and
    reaped, the sum is exact.

    It also tells how long the machine kept the program waiting (``kept_waiting``): for a CPU, and for
    the disk where the kernel keeps delay accounting (``kernel.task_delayacct``: a page of its
    binary that the busy disk is still reading), the program's or the harness's own; time that a
    busy machine, not the program, spent, which the wall-clock backstop gives back.
    """

    def __init__(self) -> None:
        self._cgroup = None
        if os.getpid() == 1:
            for path, key, unit in CGROUP_CPU:
                try:
                    _cgroup_seconds(path, key, unit)
                except (OSError, ValueError):
                    continue
                self._cgroup = (path, key, unit)
                break
        self._base = 0.0
        self._harness_too = False
        self._waited: dict[int, tuple[float, float]] = {}
        self._trusted: dict[int, float] = {}
        self._over = 0
        self._reading = 0.0
        self._cores = math.inf
        self._started = time.monotonic()

    def start(self, cores: float = math.inf, alive: Collection[int] = (), *, harness_too: bool = False) -> None:
        """Count from now; ``cores``: the CPU quota, which no reading from ``/proc`` may pass;
        ``alive``: the processes below the harness known to be running (there may be others);
        ``harness_too``: the harness's own waits count as the program's (in a conversation, where
        the program waits for it)."""
        self._trusted.clear()
        self._over = 0
        self._reading = 0.0
        self._cores = cores
        self._started = time.monotonic()
        self._base = self._total()
        self._harness_too = harness_too
        harness = os.getpid()
        processes = {pid: _Process.read(pid) for pid in alive} if none_but(alive) else _descendants(harness)
        if harness_too:
            processes[harness] = _Process.read(harness)
        self._waited = {pid: (process.waited_s, process.blocked_s) for pid, process in processes.items()}

    def trust(self, pid: int, seconds: float | None = None) -> None:
        """Leave out the time of our own process ``pid``: its final time once it is reaped
        (``seconds``), until then what it has used so far."""
        self._trusted[pid] = seconds if seconds is not None else -1.0

    def used(self) -> float:
        """The program's CPU seconds so far: never less than an earlier reading (the kernel's
        counters of a CPU can lag the harness's own, which is taken off)."""
        trusted = sum(seconds if seconds >= 0 else _Process.read(pid).own_s for pid, seconds in self._trusted.items())
        reading = self._total() - self._base - trusted
        if self._cgroup is None:
            # gVisor counts a task's time as running while its quota holds it back (several
            # busy processes under a one-core quota read up to their number times the wall
            # clock): no reading may pass what the quota lets the sandbox use.
            reading = min(reading, self._cores * (time.monotonic() - self._started))
        self._reading = max(self._reading, reading)
        return self._reading

    def past(self, limit_s: float) -> bool:
        """Whether the program has used more than ``limit_s`` (see the class's docstring)."""
        self._over = self._over + 1 if self.used() > limit_s else 0
        return self._over >= (1 if self._cgroup is not None else 2)

    def kept_waiting(self) -> tuple[float, bool]:
        """The seconds the program's live processes (and where :meth:`start` was told so, the
        harness, which a program in a conversation waits for) have been kept waiting since it, the
        longest-waiting one's (each waits beside the others; where the kernel keeps no such
        statistics, none); and whether one of the program's processes is awake now: running or
        waiting for a CPU (its CPU time is counted), or waiting in the kernel (uninterruptibly, as
        for the disk), a wait the kernel counts only when it ends."""
        harness = os.getpid()
        processes = _descendants(harness)
        if self._harness_too:
            processes[harness] = _Process.read(harness)
        elapsed = time.monotonic() - self._started
        waits = []
        waiting = False
        for pid, process in processes.items():
            if pid in self._trusted:
                continue
            waited, blocked = self._waited.get(pid, (0.0, 0.0))
            blocked = process.blocked_s - blocked
            # A kernel that misses the start of a wait for the disk adds all of its uptime (one
            # process in twelve on 6.18): no wait is longer than the step, so such a count is none.
            waits.append(process.waited_s - waited + (blocked if blocked <= elapsed else 0.0))
            waiting = waiting or (pid != harness and process.state in AWAKE)
        return max(waits, default=0.0), waiting

    def _total(self) -> float:
        if self._cgroup is not None:
            return _cgroup_seconds(*self._cgroup) - _own_seconds()
        times = os.times()
        return times.children_user + times.children_system + sum(p.all_s for p in _descendants(os.getpid()).values())


class _Process:
    """What ``/proc`` tells of one process's use of the CPU."""

    __slots__ = ("all_s", "blocked_s", "own_s", "parent", "pid", "state", "waited_s")

    def __init__(
        self,
        pid: int,
        parent: int,
        own_s: float,
        all_s: float,
        waited_s: float = 0.0,
        blocked_s: float = 0.0,
        state: str = "X",
    ) -> None:
        self.pid = pid
        self.state = state
        self.parent = parent
        self.own_s = own_s
        self.all_s = all_s
        self.waited_s = waited_s
        self.blocked_s = blocked_s

    @classmethod
    def read(cls, pid: int) -> _Process:
        """The process's time (its threads'; with its reaped children's, ``all_s``), how long it
        waited on a run queue (``waited_s``) and for the disk (``blocked_s``: 0 unless delay
        accounting is on), and its state (see ``AWAKE``); zeros for a process that is gone."""
        try:
            fields = read_small(f"/proc/{pid}/stat").rpartition(")")[2].split()
        except OSError:
            return cls(pid, 0, 0.0, 0.0)
        try:
            waited_s = int(read_small(f"/proc/{pid}/schedstat").split()[1]) * 1e-9
        except (OSError, ValueError, IndexError):
            waited_s = 0.0
        own = int(fields[11]) + int(fields[12])
        all_s = (own + int(fields[13]) + int(fields[14])) / CLOCK_TICKS
        return cls(pid, int(fields[1]), own / CLOCK_TICKS, all_s, waited_s, int(fields[39]) / CLOCK_TICKS, fields[0])


def _descendants(root: int) -> dict[int, _Process]:
    """Every process below ``root`` (inside the sandbox, all but its init)."""
    found = {int(name): _Process.read(int(name)) for name in os.listdir("/proc") if name.isdigit()}
    below = {}
    for pid, process in found.items():
        ancestor = process.parent
        while ancestor in found and ancestor != root:
            ancestor = found[ancestor].parent
        if ancestor == root:
            below[pid] = process
    return below
