"""Length-prefixed JSON messages over a Unix socket, optionally carrying file descriptors
(standard library only).

A length prefix instead of lines means a reader takes exactly one message and never reads
ahead into bytes meant for a process it is about to fork. Descriptors travel with a
message's 4-byte header (SCM_RIGHTS), so they arrive with exactly that message.
"""

from __future__ import annotations

import select
import struct
import time

from ._lean import dumps, loads, socket
from ._typing import TYPE_CHECKING
from .protocol import MAX_MESSAGE_BYTES

if TYPE_CHECKING:
    from typing import Any

_HEADER = struct.Struct(">I")
_FD_SIZE = struct.calcsize("i")
MAX_FDS = 4


class ChannelClosed(EOFError):
    """The peer closed the channel (usually: it exited or was killed)."""


class ChannelTimeout(TimeoutError):
    """No complete message arrived before the deadline."""


class ChannelError(ValueError):
    """The peer sent something that is not a well-formed message."""


def encode_message(message: dict[str, Any]) -> bytes:
    """``message`` as it travels: its length, then its JSON."""
    data = dumps(message).encode()
    if len(data) > MAX_MESSAGE_BYTES:
        raise ChannelError(f"message of {len(data)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return _HEADER.pack(len(data)) + data


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        # Non-blocking once and for all, waiting in poll only when a read or write would block: a
        # socket timeout set per read costs an ioctl and a poll before every read (a test takes
        # six reads and three writes, most of them of bytes already there).
        sock.setblocking(False)
        self.sock = sock
        # Descriptors that arrived with the last message; the receiver owns (and closes) them.
        self.fds: list[int] = []

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
        data = memoryview(encode_message(message))
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))] if fds else []
        # Until every byte is out, and not a call more: a peer that has read the whole message
        # may have ended since (a test that ends its own process), and an empty send would then
        # be a broken pipe.
        while data:
            try:
                sent = self.sock.sendmsg([data], rights)
            except BlockingIOError:
                self._wait(select.POLLOUT, None)
                continue
            data, rights = data[sent:], []

    def wait_readable(self, timeout: float) -> bool:
        """True when a message has started to arrive (or the peer closed) within ``timeout`` seconds."""
        return self._poll(select.POLLIN, max(timeout, 0) * 1000)

    def recv(self, deadline: float | None = None) -> dict[str, Any]:
        """Read one message; ``deadline`` is a ``time.monotonic()`` value or None to block."""
        self.fds = []
        header = self._read_header(deadline)
        (size,) = _HEADER.unpack(header)
        if size > MAX_MESSAGE_BYTES:
            raise ChannelError(f"message of {size} bytes exceeds {MAX_MESSAGE_BYTES}")
        body = self._read_exactly(size, deadline)
        try:
            message = loads(body, parse_constant=_reject_constant, parse_float=_finite_float)
        except (ValueError, RecursionError) as exc:
            # Malformed JSON and UTF-8, integers past the interpreter's digit limit, nesting past
            # its recursion limit: whatever the peer sent, it is one bad message, never a crash.
            raise ChannelError(f"malformed message: {str(exc)[:200]}") from None
        if type(message) is not dict or type(message.get("op")) is not str:
            raise ChannelError("a message must be an object with an 'op'")
        return message

    def _read_header(self, deadline: float | None) -> bytes:
        data, ancillary = self._receive(_HEADER.size, deadline, socket.CMSG_SPACE(MAX_FDS * _FD_SIZE))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                count = len(payload) // _FD_SIZE
                self.fds.extend(struct.unpack(f"{count}i", payload[: count * _FD_SIZE]))
        return data + self._read_exactly(_HEADER.size - len(data), deadline)

    def _read_exactly(self, size: int, deadline: float | None) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            chunks += self._receive(min(size - len(chunks), 1 << 20), deadline)[0]
        return bytes(chunks)

    def _receive(
        self, size: int, deadline: float | None, ancillary_size: int = 0
    ) -> tuple[bytes, list[tuple[int, int, bytes]]]:
        """One read within the deadline; an empty read means the peer is gone."""
        while True:
            try:
                data, ancillary, _, _ = self.sock.recvmsg(size, ancillary_size)
            except BlockingIOError:
                self._wait(select.POLLIN, deadline)
                continue
            except OSError as exc:
                raise ChannelClosed(str(exc)) from exc
            if not data:
                raise ChannelClosed("peer closed the channel")
            return data, ancillary

    def _wait(self, event: int, deadline: float | None) -> None:
        """Until the socket is ready for ``event`` (or has an error), or past ``deadline``."""
        if deadline is None:
            timeout_ms = -1.0
        else:
            timeout_ms = (deadline - time.monotonic()) * 1000
            if timeout_ms <= 0:
                raise ChannelTimeout
        self._poll(event, timeout_ms)

    def _poll(self, event: int, timeout_ms: float) -> bool:
        # poll, not select: Debian's gVisor refuses pselect6 under an OCI seccomp profile.
        poller = select.poll()
        poller.register(self.sock, event)
        return bool(poller.poll(timeout_ms))

    def close(self) -> None:
        self.sock.close()


def _reject_constant(name: str) -> Any:
    raise ChannelError(f"non-standard JSON constant {name}")


def _finite_float(text: str) -> float:
    # "1e999" is valid JSON that Python reads as infinity, which no strict JSON writer accepts back.
    value = float(text)
    if value - value != 0:
        raise ChannelError(f"number {text[:40]} is out of range")
    return value
