"""One engine per process for the drop-ins, made on first use and closed when the process exits.

Drop-in functions have no place for an engine in their signatures, so each compat module
keeps one here; a forked child (reward workers often are) gets its own, since an engine's event
loop thread does not survive a fork.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar

from .. import Limits, Settings, SyncEngine
from ..lowlevel import on_process_engine

__all__ = ["SharedEngine", "deadline_at", "seconds_left"]

# The deadline (a time.monotonic() value) of the batch the drop-in's call belongs to: a drop-in's
# signature is the reference's, with no place for it.
_deadline: ContextVar[float | None] = ContextVar("airlock_batch_deadline", default=None)


@contextlib.contextmanager
def deadline_at(moment: float | None) -> Iterator[None]:
    """Calls made in this block give up at ``moment`` (a ``time.monotonic()`` value; None: never)."""
    token = _deadline.set(moment)
    try:
        yield
    finally:
        _deadline.reset(token)


def seconds_left() -> float | None:
    """What is left of the current call's deadline, None without one."""
    moment = _deadline.get()
    return None if moment is None else max(0.0, moment - time.monotonic())


class SharedEngine:
    """A lazily made :class:`SyncEngine` with ``limits``, or the one given to :meth:`configure`."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._lock = threading.Lock()
        self._shared: tuple[int, SyncEngine] | None = None
        # A Ray node's actor hands its engine to every drop-in imported there (engine.distributed).
        on_process_engine(self.configure)

    @property
    def limits(self) -> Limits:
        """The limits the drop-in runs programs with (an engine it is given keeps its own)."""
        return self._limits

    def configure(self, engine: SyncEngine | None) -> None:
        """Use ``engine`` for every call from this process (``None``: create one on first use)."""
        with self._lock:
            self._shared = (os.getpid(), engine) if engine is not None else None

    def close(self) -> None:
        """Close the engine in use; the next call starts a new one."""
        with self._lock:
            shared, self._shared = self._shared, None
        if shared is not None and shared[0] == os.getpid():
            shared[1].close()

    def get(self) -> SyncEngine:
        with self._lock:
            if self._shared is None or self._shared[0] != os.getpid():
                # It judges: the sandboxes paused to disk in AIRLOCK_PAUSED_DIR are a server's.
                self._shared = (os.getpid(), SyncEngine(Settings(paused_dir=None), limits=self._limits))
            return self._shared[1]
