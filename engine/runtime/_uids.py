"""A host uid of its own for every container in flight.

The kernel keeps some accounts per user, not per container: inotify instances, pipe buffer
pages, message queue bytes, locked memory. Containers that shared a uid could starve each other
through them and signal to each other by how much is left. So, like ``isolate`` gives each box
its own uid, each container gets a uid from a dedicated range, leased for its lifetime.

Leases are unique across every engine process on the host: a lease is an exclusive ``flock`` on
a file named after the uid, which the holder deletes when it gives the uid back. The kernel
releases the lock when the holder dies, so a crashed engine leaves at most an unlocked file,
which the next lease of that uid takes over.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import threading
from pathlib import Path

from .._errors import SandboxError
from ._labels import run_dir

__all__ = ["UidLease", "UidPool", "default_lock_dir"]


def default_lock_dir() -> Path:
    return run_dir("uids")


class UidLease:
    """One uid held for one container; :meth:`release` gives it back."""

    def __init__(self, pool: UidPool, uid: int, fd: int, path: Path) -> None:
        self.uid = uid
        self._pool = pool
        self._fd: int | None = fd
        self._path = path

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            # Deleted while still locked: whoever opens the name next makes a new file, and
            # whoever opened the old one finds it gone once it holds the lock (see _try_lock).
            with contextlib.suppress(OSError):
                self._path.unlink()
            os.close(fd)
            self._pool._forget(self.uid)


class UidPool:
    """Hands out uids in ``[first, first + count)`` that no other container on the host holds."""

    def __init__(self, first: int, count: int, lock_dir: Path | None = None) -> None:
        self.first = first
        self.count = count
        self._lock_dir = lock_dir or default_lock_dir()
        self._mine: set[int] = set()
        self._guard = threading.Lock()

    def acquire(self) -> UidLease:
        """A uid no container holds; ``SandboxError`` when the whole range is taken."""
        self._ensure_lock_dir()
        # A random start spreads engines over the range, so that they rarely probe the same files.
        start = random.randrange(self.count)  # noqa: S311 - not a secret, only a starting point
        with self._guard:
            for offset in range(self.count):
                uid = self.first + (start + offset) % self.count
                if uid in self._mine:
                    continue
                fd = self._try_lock(uid)
                if fd is not None:
                    self._mine.add(uid)
                    return UidLease(self, uid, fd, self._lock_dir / str(uid))
        raise SandboxError(
            f"every sandbox uid in {self.first}-{self.first + self.count - 1} is in use; "
            "widen AIRLOCK_SANDBOX_UID_COUNT or lower the concurrency"
        )

    def sweep(self) -> None:
        """Delete the files that engines which died while holding a uid left behind."""
        try:
            paths = [path for path in self._lock_dir.iterdir() if path.name.isdigit()]
        except OSError:
            return
        for path in paths:
            with self._guard:
                if int(path.name) in self._mine:
                    continue
                try:
                    fd = self._try_lock(int(path.name))
                except SandboxError:
                    continue
            if fd is not None:
                with contextlib.suppress(OSError):
                    path.unlink()
                os.close(fd)

    def _forget(self, uid: int) -> None:
        with self._guard:
            self._mine.discard(uid)

    def _ensure_lock_dir(self) -> None:
        if self._lock_dir.is_dir():
            return
        self._lock_dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() != 0:
            with contextlib.suppress(OSError):  # shared by every user, like /tmp itself
                self._lock_dir.chmod(0o1777)

    def _try_lock(self, uid: int) -> int | None:
        path = self._lock_dir / str(uid)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise SandboxError(f"cannot lease a sandbox uid in {self._lock_dir}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # The holder deletes the file before it lets go: a lock on a deleted file is no lease.
            if os.fstat(fd).st_ino != os.stat(path).st_ino:
                raise FileNotFoundError(path)
        except OSError:
            os.close(fd)
            return None
        return fd
