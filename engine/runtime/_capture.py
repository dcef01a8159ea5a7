"""Bounded collection of a container's stdout and stderr while they stream, and whole lines out
of a stream of bytes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from ._base import Exchange, LineSink

__all__ = ["Capture", "Lines"]


class Lines:
    """Whole lines (without their newline) out of bytes that arrive in chunks of any size, each
    byte looked at once however long a line grows: what a process in a sandbox writes (a kernel's
    events, a watcher's) may be one line of many megabytes sent in small chunks. A line longer
    than ``max_bytes`` is dropped whole, counted in ``dropped``, and memory stays below it."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.dropped = 0
        self._pending = bytearray()
        self._scanned = 0
        self._dropping = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The lines ``data`` completes."""
        self._pending += data
        while (end := self._pending.find(b"\n", self._scanned)) >= 0:
            line = bytes(self._pending[:end])
            del self._pending[: end + 1]  # CPython drops a bytearray's head without copying the rest
            self._scanned = 0
            if self._dropping:
                self._dropping = False
                continue
            yield line
        self._scanned = len(self._pending)
        if self._scanned > self.max_bytes:
            self._pending.clear()
            self._scanned = 0
            if not self._dropping:
                self._dropping = True
                self.dropped += 1


class Capture:
    """Keeps at most ``limit`` bytes per stream and reports complete stdout lines to a sink.

    With a sink, lines it has consumed are dropped, so ``stdout`` holds only the unterminated
    tail and memory stays bounded by one line. ``done`` turns true when a stream goes over its
    limit or the sink asks to stop; the caller then stops reading and kills the producer.
    """

    def __init__(self, stdout_limit: int, stderr_limit: int, on_stdout_line: LineSink | None = None) -> None:
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.stdout_truncated = False
        self.stderr_truncated = False
        self.stopped = False
        self._limits = (stdout_limit, stderr_limit)
        self._sink = on_stdout_line
        self._stdout_seen = 0

    @property
    def done(self) -> bool:
        return self.stopped or self.stdout_truncated or self.stderr_truncated

    def feed_stdout(self, data: bytes) -> None:
        room = self._limits[0] - self._stdout_seen
        self._stdout_seen += len(data)
        self.stdout_truncated |= len(data) > room
        # What came before this chunk holds no newline (each complete line went to the sink).
        start, scanned = 0, len(self.stdout)
        self.stdout += data[: max(room, 0)]
        if self._sink is None:
            return
        while not self.stopped:
            end = self.stdout.find(b"\n", max(start, scanned))
            if end < 0:
                break
            self.stopped = self._sink(bytes(self.stdout[start:end]))
            start = end + 1
        del self.stdout[:start]

    def feed_stderr(self, data: bytes) -> None:
        self.stderr_truncated |= self._append(self.stderr, data, self._limits[1])

    @staticmethod
    def _append(buffer: bytearray, data: bytes, limit: int) -> bool:
        room = limit - len(buffer)
        buffer += data[: max(room, 0)]
        return len(data) > room

    def exchange(self, started: float, **fields: Any) -> Exchange:
        """What was captured, as the runtime's answer; ``started`` is a ``time.monotonic()`` value."""
        fields.setdefault("oom_killed", False)
        return Exchange(
            stdout=bytes(self.stdout),
            stderr=bytes(self.stderr),
            stdout_truncated=self.stdout_truncated,
            stderr_truncated=self.stderr_truncated,
            stopped=self.stopped,
            wall_time_s=time.monotonic() - started,
            **fields,
        )
