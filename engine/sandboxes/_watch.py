"""Watching a directory of a sandbox: an inotify reader in the container (``watch.py`` in the
image), run as the sandbox's user, and a buffer on the host so that a client that polls (E2B's
sync SDK) loses nothing between two polls."""

from __future__ import annotations

import contextlib
import enum
import json
import secrets
import signal
import sys
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskStatus
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._errors import SandboxError
from ..runtime import Lines

if TYPE_CHECKING:
    from ._sandbox import Output, Process, Sandbox

__all__ = ["FileEvent", "FileEventType", "Watcher"]

WATCH_SCRIPT = "/opt/airlock/watch.py"
READY = b'{"ready": true}'
# The sandbox's user can write into its watchers' output (same uid), so everything the host
# keeps for them is bounded: names, the memory and the number of events buffered for a watcher
# nobody drains (the oldest events go first), and the watchers open at once in a sandbox. An
# event is kept as a (name, type) pair: its memory is the name's object plus the pair's slot.
MAX_NAME_CHARS = 4096
WATCH_BUFFER_BYTES = 256 << 10
MAX_BUFFERED_EVENTS = 4096
EVENT_SLOT_BYTES = 64
MAX_WATCHERS = 16
MAX_LINE_BYTES = 2 * MAX_NAME_CHARS + 64


class FileEventType(enum.StrEnum):
    """What happened to a path, in fsnotify's (and so E2B's) five words."""

    CREATE = "create"
    WRITE = "write"
    REMOVE = "remove"
    RENAME = "rename"
    CHMOD = "chmod"


class FileEvent(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str = Field(max_length=MAX_NAME_CHARS, description="the path, relative to the watched directory")
    type: FileEventType


class Watcher:
    """Events under one directory of a sandbox, from the moment :meth:`Sandbox.watch` returned:
    iterate :meth:`events` as they come, or :meth:`drain` what came since the last call. One
    consumer at a time; the watcher ends when stopped, when the directory goes, or with its
    sandbox."""

    def __init__(self, sandbox: Sandbox, process: Process, path: str, recursive: bool) -> None:
        self.id = secrets.token_hex(8)
        self.path = path
        self.recursive = recursive
        self.dropped = 0
        self._sandbox = sandbox
        self._process = process
        self._buffer: deque[tuple[str, FileEventType]] = deque()
        self._buffered_bytes = 0
        self._arrived = anyio.Event()
        self._ended = False

    @property
    def ended(self) -> bool:
        return self._ended

    @property
    def buffered_bytes(self) -> int:
        """The memory the events waiting to be taken hold, as counted against ``WATCH_BUFFER_BYTES``."""
        return self._buffered_bytes

    def drain(self) -> list[FileEvent]:
        """The events buffered since the last call."""
        events = [FileEvent(name=name, type=kind) for name, kind in self._buffer]
        self._buffer.clear()
        self._buffered_bytes = 0
        return events

    async def next_event(self) -> FileEvent | None:
        """The oldest event not yet taken, once there is one; None once the watcher has ended.
        Cancelling the wait loses nothing."""
        while not self._buffer and not self._ended:
            self._arrived = anyio.Event()
            await self._arrived.wait()
        return self._take() if self._buffer else None

    async def events(self) -> AsyncGenerator[FileEvent, None]:
        """Events as they come; the iteration ends with the watcher."""
        while (event := await self.next_event()) is not None:
            yield event

    async def stop(self) -> None:
        self._sandbox.watchers.pop(self.id, None)
        if self._process.exit is None:
            with contextlib.suppress(SandboxError):
                await self._process.signal(signal.SIGKILL)

    async def _run(self, *, task_status: TaskStatus[bool]) -> None:
        """Follow the reader's output; started (in the sandbox's tasks) with True once every
        watch is in place, with False when the reader ended before."""
        try:
            with self._process.subscribe() as output:
                self._process.start()
                lines = _stdout_lines(output)
                if await anext(lines, None) != READY:
                    task_status.started(False)
                    return
                task_status.started(True)
                async for line in lines:
                    self._add(line)
        finally:
            # It stays among the sandbox's watchers until stopped: a poller still drains it.
            self._ended = True
            self._arrived.set()

    def _add(self, line: bytes) -> None:
        try:
            event = FileEvent.model_validate(json.loads(line))
        except (ValueError, ValidationError):
            return
        self._buffer.append((event.name, event.type))
        self._buffered_bytes += _cost(event.name)
        while self._buffered_bytes > WATCH_BUFFER_BYTES or len(self._buffer) > MAX_BUFFERED_EVENTS:
            self._take()
            self.dropped += 1
        self._arrived.set()

    def _take(self) -> FileEvent:
        name, kind = self._buffer.popleft()
        self._buffered_bytes -= _cost(name)
        return FileEvent(name=name, type=kind)


def _cost(name: str) -> int:
    return EVENT_SLOT_BYTES + sys.getsizeof(name)


async def _stdout_lines(output: AsyncIterator[Output]) -> AsyncIterator[bytes]:
    lines = Lines(MAX_LINE_BYTES)
    async for chunk in output:
        if chunk.stream == "stdout":
            for line in lines.feed(chunk.data):
                yield line
