"""Work an engine starts and does not wait for: removals, pool refills, session reaping, stream
pumps. In a plain task group, one such task that raised would cancel all the others and refuse
every new one; a job whose container then cannot be retired never gives its slot back, and the
engine hangs once the slots are gone. Here an unexpected failure costs that task only, and is logged."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

log = logging.getLogger("airlock.engine")


class BackgroundTasks:
    """A task group whose tasks cannot take each other, or the engine, down."""

    def __init__(self, group: TaskGroup) -> None:
        self._group = group

    def start_soon(self, work: Callable[..., Awaitable[Any]], *args: Any) -> None:
        self._group.start_soon(_contained, work, args, name=_name(work))

    async def start(self, work: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Start ``work`` and return what it reports through ``task_status`` (anyio's protocol);
        a failure before that is the caller's to handle, as with a plain task group."""

        async def contained(*, task_status: TaskStatus[Any] = anyio.TASK_STATUS_IGNORED) -> None:
            relay = _Relay(task_status)
            try:
                await work(*args, task_status=relay)
            except Exception:
                if not relay.reported:
                    raise
                _log_failure(work)

        return await self._group.start(contained, name=_name(work))


class _Relay:
    def __init__(self, status: TaskStatus[Any]) -> None:
        self._status = status
        self.reported = False

    def started(self, value: Any = None) -> None:
        self.reported = True
        self._status.started(value)


async def _contained(work: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
    try:
        await work(*args)
    except Exception:  # noqa: BLE001 - whatever it was, it must not end the others
        _log_failure(work)


def _log_failure(work: Callable[..., Awaitable[Any]]) -> None:
    log.exception("background task %s failed; the engine goes on without it", _name(work))


def _name(work: Callable[..., Awaitable[Any]]) -> str:
    return getattr(work, "__qualname__", repr(work))
