"""Ownership labels on everything the engine creates, and the test for "left over".

Several engines share one host: `airlock score` runs, servers on the host and servers in
containers of their own (each in a pid namespace of its own). An engine removes another's
containers only when their owner is provably gone, never because it cannot see the owner:

- every owner holds an exclusive ``flock`` on a lease file named after its session, in a folder
  every engine on the host shares (``/run/airlock/owners``; a server in a container mounts
  ``/run/airlock``, as ``docs/deployment.md`` says). The kernel releases the lock when the owner
  dies, in whatever pid namespace it ran: a lease that exists and is not held proves the owner
  gone;
- without a lease file to read (a folder not shared), the owner's pid proves something only in
  the pid namespace it was taken in: an owner of this namespace whose pid is gone, or now a
  process started at another time, is gone. An owner of another namespace is kept.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
import time
import uuid
from collections.abc import Collection, Mapping
from pathlib import Path

import psutil

from .._version import __version__

__all__ = [
    "LABEL_PREFIX",
    "MANAGED",
    "Owner",
    "forget_leases",
    "is_leftover",
    "lease_released",
    "run_dir",
    "sweep_leases",
]

LABEL_PREFIX = "io.airlock."
MANAGED = f"{LABEL_PREFIX}managed"
OWNER = f"{LABEL_PREFIX}owner"
SESSION = f"{LABEL_PREFIX}session"
VERSION = f"{LABEL_PREFIX}version"
PURPOSE = f"{LABEL_PREFIX}purpose"
# A dead owner's lease stays this long for every engine (of every runtime) to find its
# containers; then the next engine to start deletes it.
LEASE_KEPT_S = 24 * 3600


def run_dir(name: str) -> Path:
    """A folder every engine on this host shares: under /run for root (never aged out), else in
    the temporary directory, shared by every user like the directory itself."""
    if os.geteuid() == 0:
        return Path("/run/airlock") / name
    return Path(tempfile.gettempdir()) / f"airlock-{name}"


def _pid_namespace() -> int | None:
    with contextlib.suppress(OSError):
        return os.stat("/proc/self/ns/pid").st_ino
    return None


class Owner:
    """Identifies one engine instance: this host, this process (pid, start time, pid namespace),
    a session id, and a lease on that session held while the process lives."""

    def __init__(self, lease_dir: Path | None = None) -> None:
        process = psutil.Process(os.getpid())
        self.host = socket.gethostname()
        self.token = f"{self.host}:{process.pid}:{process.create_time():.3f}:{_pid_namespace() or ''}"
        self.session = uuid.uuid4().hex
        self.lease_dir = lease_dir or run_dir("owners")
        # The runtime whose containers the owner makes: written into its lease, so that an
        # engine of that runtime can tell when a dead owner has nothing left.
        self.runtime = ""
        self._lease: int | None = None

    def labels(self, purpose: str) -> dict[str, str]:
        self._hold_lease()
        return {
            MANAGED: "true",
            OWNER: self.token,
            SESSION: self.session,
            VERSION: __version__,
            PURPOSE: purpose,
        }

    def release(self) -> None:
        """Give the lease up, once nothing of this owner's is left (its engine closed)."""
        if self._lease is not None:
            fd, self._lease = self._lease, None
            with contextlib.suppress(OSError):
                (self.lease_dir / self.session).unlink()
            os.close(fd)

    def _hold_lease(self) -> None:
        if self._lease is not None:
            return
        with contextlib.suppress(OSError):
            self.lease_dir.mkdir(parents=True, exist_ok=True)
            if os.geteuid() != 0:
                self.lease_dir.chmod(0o1777)
        try:
            fd = os.open(self.lease_dir / self.session, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            return  # no lease: the owner's pid is all there is to go by
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, self.runtime.encode())
        self._lease = fd


def lease_released(session: str, lease_dir: Path) -> bool | None:
    """Whether the session's lease is released (its owner is gone), None when there is no lease
    to tell (no file, or a session that names none)."""
    if not session or "/" in session or session.startswith("."):
        return None
    try:
        fd = os.open(lease_dir / session, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def is_leftover(labels: Mapping[str, str], lease_dir: Path | None = None) -> bool:
    """True when the engine that created a container on this host is provably gone (see the
    module's docstring); never for a container made on another host."""
    host, _, rest = labels.get(OWNER, "").partition(":")
    if host != socket.gethostname():
        return False
    released = lease_released(labels.get(SESSION, ""), lease_dir or run_dir("owners"))
    if released is not None:
        return released
    pid_text, started_text, namespace = [*rest.split(":"), "", ""][:3]
    if not namespace or namespace != str(_pid_namespace()):
        return False
    try:
        pid, started = int(pid_text), float(started_text)
    except ValueError:
        return False
    try:
        return bool(abs(psutil.Process(pid).create_time() - started) > 0.01)
    except psutil.NoSuchProcess:
        return True


def sweep_leases(lease_dir: Path | None = None) -> None:
    """Delete the leases of owners gone for longer than ``LEASE_KEPT_S``."""
    folder = lease_dir or run_dir("owners")
    try:
        leases = list(folder.iterdir())
    except OSError:
        return
    for lease in leases:
        with contextlib.suppress(OSError):
            old = time.time() - lease.stat().st_mtime > LEASE_KEPT_S
            if old and lease_released(lease.name, folder):
                lease.unlink()


def forget_leases(runtime: str, live: Collection[str], lease_dir: Path | None = None) -> None:
    """Delete the released leases of ``runtime``'s dead owners but those of ``live`` sessions
    (which still have containers): nothing of theirs is left to prove gone."""
    folder = lease_dir or run_dir("owners")
    try:
        leases = list(folder.iterdir())
    except OSError:
        return
    for lease in leases:
        if lease.name in live:
            continue
        with contextlib.suppress(OSError):
            if lease.read_text() == runtime and lease_released(lease.name, folder):
                lease.unlink()
