"""Interactive tests: a test's standard input and output as a live exchange with the host
(standard library only).

In an interactive request the program's stdin and stdout are pipes, not files. What it writes
goes out as ``{"type": "data", "index": i, "data": <base64>}`` frames, before the test's own
frame; what it reads comes from the host, which keeps the container's stdin open after the
request and writes newline-terminated JSON messages on it:

    {"index": i, "data": <base64>}    bytes for test i's standard input
    {"index": i, "end": true}         test i's standard input ends

The host relays between two containers this way (a program and the interactor that judges it),
so neither can reach the other but through the bytes of the protocol. Messages for a test
that has not started yet wait; those for a test that has ended are dropped.
"""

from __future__ import annotations

import binascii
import fcntl
import os
import select

from ._lean import loads, suppress
from ._typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# The longest message line the host sends (a chunk of at most CHUNK_BYTES, base64-encoded).
MAX_LINE_BYTES = 1 << 20
CHUNK_BYTES = 1 << 16
# A data frame's bytes besides its data.
FRAME_OVERHEAD_BYTES = 48


class HostFeed:
    """The host's messages on the harness's stdin, read as they come and kept by test."""

    def __init__(self, fd: int, start: bytes = b"") -> None:
        """``start``: what was read of the feed with the request."""
        self.fd = fd
        os.set_blocking(fd, False)
        self._partial = bytearray()
        self._data: dict[int, bytearray] = {}
        self._ended: set[int] = set()
        self._closed = False
        # Tests before this one are over: what arrives for them is dropped.
        self.current = 0
        self._add(start)

    @property
    def closed(self) -> bool:
        return self._closed

    def read(self) -> None:
        """Take in whatever the host has written (the descriptor was readable)."""
        while not self._closed:
            try:
                chunk = os.read(self.fd, CHUNK_BYTES * 2)
            except BlockingIOError:
                return
            if not chunk:
                self._closed = True
                return
            self._add(chunk)

    def _add(self, chunk: bytes) -> None:
        self._partial += chunk
        *lines, rest = self._partial.split(b"\n")
        self._partial = bytearray(rest)
        if len(self._partial) > MAX_LINE_BYTES:
            # Only the host writes here; a line this long is a broken host, whose feed ends.
            self._closed = True
        for line in lines:
            self._take(line)

    def _take(self, line: bytes | bytearray) -> None:
        try:
            message = loads(bytes(line))
            index = message["index"]
            if type(index) is not int or index < self.current:
                return
            if message.get("end") is True:
                self._ended.add(index)
            else:
                self._data.setdefault(index, bytearray()).extend(binascii.a2b_base64(message["data"]))
        except (ValueError, TypeError, KeyError, binascii.Error):
            return

    def take(self, index: int) -> bytes:
        """What has arrived for test ``index``'s stdin and was not taken yet."""
        return bytes(self._data.pop(index, b""))

    def ended(self, index: int) -> bool:
        """Whether test ``index``'s stdin has ended (or the host's feed altogether)."""
        return self._closed or index in self._ended

    def move_past(self, index: int) -> None:
        """Test ``index`` is over: drop what is kept for it and anything earlier."""
        self.current = index + 1
        for done in [kept for kept in self._data if kept <= index]:
            del self._data[done]
        self._ended = {kept for kept in self._ended if kept > index}


class Conversation:
    """One test's live stdin and stdout. The program gets ``program_fds`` (the pipes' far ends);
    the harness moves bytes while it waits on the test (``Clock.wait`` polls ``watched`` and
    calls ``serve``), copying what the program writes into ``transcript`` (the test's stdout
    as reported) and out as data frames."""

    def __init__(self, index: int, feed: HostFeed, emit: Callable[[dict[str, Any]], None], transcript: int) -> None:
        self.index = index
        self.feed = feed
        self._emit = emit
        self._transcript = transcript
        stdin_read, self._to_program = os.pipe2(os.O_CLOEXEC)
        self._from_program, stdout_write = os.pipe2(os.O_CLOEXEC)
        for fd in (self._to_program, self._from_program):
            os.set_blocking(fd, False)
        # The pipe grows to what an unprivileged process may ask for, so that fewer chunks cross.
        with suppress(OSError):
            fcntl.fcntl(self._to_program, fcntl.F_SETPIPE_SZ, CHUNK_BYTES)
        self.program_fds = (stdin_read, stdout_write)
        self._pending = bytearray()
        self._input_open = True
        self._output_open = True
        self._finished = False
        # What the data frames took of the report, which the clock holds to a budget.
        self.sent_bytes = 0

    def watched(self) -> list[tuple[int, int]]:
        """The descriptors to poll, with their events, while the test runs."""
        self._forward_input()
        fds = [] if self.feed.closed else [(self.feed.fd, select.POLLIN)]
        if self._input_open and self._pending:
            fds.append((self._to_program, select.POLLOUT))
        if self._output_open:
            fds.append((self._from_program, select.POLLIN))
        return fds

    def serve(self, ready: set[int]) -> None:
        """Move the bytes that can move now; ``ready`` are the polled descriptors with events."""
        if self.feed.fd in ready:
            self.feed.read()
        self._forward_input()
        if self._from_program in ready:
            self._forward_output()

    def _forward_input(self) -> None:
        if not self._input_open:
            return
        self._pending += self.feed.take(self.index)
        while self._pending:
            try:
                written = os.write(self._to_program, self._pending[:CHUNK_BYTES])
            except BlockingIOError:
                return
            except OSError:
                # The program closed its stdin (or exited): what it did not read is gone.
                self._close_input()
                return
            del self._pending[:written]
        if self.feed.ended(self.index):
            self._close_input()

    def _close_input(self) -> None:
        self._input_open = False
        self._pending.clear()
        with suppress(OSError):
            os.close(self._to_program)

    def _forward_output(self, chunks: int | None = 16) -> None:
        """Send on what the program wrote: at most ``chunks`` reads while it runs, so that the
        clock still checks the test's limits when a program floods its output."""
        while self._output_open and (chunks is None or chunks > 0):
            if chunks is not None:
                chunks -= 1
            try:
                chunk = os.read(self._from_program, CHUNK_BYTES)
            except BlockingIOError:
                return
            if not chunk:
                self._output_open = False
                return
            view = memoryview(chunk)
            while view:
                view = view[os.write(self._transcript, view) :]
            data = binascii.b2a_base64(chunk, newline=False).decode("ascii")
            self.sent_bytes += len(data) + FRAME_OVERHEAD_BYTES
            self._emit({"type": "data", "index": self.index, "data": data})

    def finish(self) -> None:
        """The program is gone: send on what it left in the pipe, then close everything (once)."""
        if self._finished:
            return
        self._finished = True
        with suppress(OSError):
            os.close(self.program_fds[1])
        self._forward_output(chunks=None)
        self.feed.move_past(self.index)
        for fd in (self.program_fds[0], self._from_program):
            with suppress(OSError):
                os.close(fd)
        if self._input_open:
            self._close_input()
