"""Bounded collection of a container's stdout and stderr while they stream."""

from __future__ import annotations

import time
from typing import Any

from ._base import Exchange, LineSink

__all__ = ["Capture"]


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
        self.stdout += data[: max(room, 0)]
        if self._sink is None:
            return
        start = 0
        while not self.stopped:
            end = self.stdout.find(b"\n", start)
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
