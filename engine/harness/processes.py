"""Processes in the sandbox: whom the program runs as, killing what a test leaves running,
reaping orphans, and the kernel's OOM counter (standard library only)."""

from __future__ import annotations

import contextlib
import os
import time

from ._lean import signal
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


def grew(before: int | None, after: int | None) -> bool:
    return before is not None and after is not None and after > before


def _state_and_parent(pid: int) -> tuple[str, int] | None:
    try:
        fields = read_text(f"/proc/{pid}/stat").rpartition(")")[2].split()
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
            with contextlib.suppress(ChildProcessError):
                os.waitpid(found.si_pid, 0)
            continue
        # A supervised process is first in line: reap the others by name, leaving it be.
        me = os.getpid()
        for pid in _other_pids(supervised):
            state = _state_and_parent(pid)
            if state is not None and state == ("Z", me):
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        return


def kill_all_but(keep: Collection[int]) -> None:
    """As PID 1, SIGKILL every other process in the namespace except ``keep``, and reap them.

    Killed processes die asynchronously and their orphans come back to us as zombies, so this
    loops until nothing is left but ``keep`` (and zombies ``keep`` itself has yet to reap).
    """
    for _ in range(500):
        reap_orphans(keep)
        left = False
        for pid in _other_pids(keep):
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
        with contextlib.suppress(BlockingIOError):
            while os.read(self.fd, 4096):
                pass


def _ignore(signum: int, frame: object) -> None:
    """A handler, so that SIGCHLD is delivered (and wakes the poll) instead of discarded."""
