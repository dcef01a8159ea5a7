"""Closing a process to others of its uid (standard library only)."""

from __future__ import annotations

import ctypes

PR_SET_DUMPABLE = 4


def make_undumpable() -> None:
    """Mark this process not dumpable: another process of the same uid can then neither read
    nor write its memory (``/proc/<pid>/mem``), nor open its descriptors or environment, nor
    signal it when it is a namespace's init. Our seccomp profile lets no process become
    dumpable again, so code that runs here later cannot undo it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
