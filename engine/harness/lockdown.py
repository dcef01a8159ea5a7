"""Closing a process to others of its uid, and fencing its CPU time (standard library only).

``prctl`` is called through ``_ctypes``, the C module, not the ``ctypes`` package around it:
importing that package costs about 4 ms of every container's start.
"""

from __future__ import annotations

import _ctypes
import resource

PR_SET_DUMPABLE = 4


class _CInt(_ctypes._SimpleCData):  # type: ignore[type-arg] # generic only in the stubs
    _type_ = "i"


class _LibcFunction(_ctypes.CFuncPtr):
    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
    _restype_ = _CInt


class _Process:
    """The symbols already loaded in this process (libc's among them), as ``CFuncPtr`` reads a library."""

    _handle = _ctypes.dlopen(None)  # type: ignore[arg-type] # None: this process, as dlopen(3) takes it


def make_undumpable() -> None:
    """Mark this process not dumpable: another process of the same uid can then neither read
    nor write its memory (``/proc/<pid>/mem``), nor open its descriptors or environment, nor
    signal it when it is a namespace's init. Our seccomp profile lets no process become
    dumpable again, so code that runs here later cannot undo it."""
    prctl = _LibcFunction(("prctl", _Process))  # type: ignore[arg-type] # anything with a _handle will do
    if prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(_ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def fence_cpu(seconds: int, *, in_place: bool = False) -> None:
    """The kernel's fence on this process's CPU time (``RLIMIT_CPU``), set past the test's limit,
    which the harness enforces: ``SIGXCPU`` at ``seconds``, so that the harness can name the
    fence as what ended the test (see ``Supervisor.finish``), and ``SIGKILL`` a second later for
    a program that ignores it.

    A process whose tests share it (``in_place``) has used CPU time before this test: the fence is
    set that far on, and only its soft limit, since no unprivileged process can raise a hard limit
    again for the next test. The harness's own count, which ends every test, stays the limit."""
    if not in_place:
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    soft = int(usage.ru_utime + usage.ru_stime) + 1 + seconds
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
