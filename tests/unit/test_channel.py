"""The harness's channel reads whatever the program's side writes into it, and fails only with
its own errors: a message that does not decode ends that test, never the harness."""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.harness.channel import Channel, ChannelClosed, ChannelError


@contextlib.contextmanager
def delivered(body: bytes) -> Iterator[Channel]:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(struct.pack(">I", len(body)) + body)
        theirs.shutdown(socket.SHUT_WR)
        yield Channel(ours)


@pytest.mark.parametrize(
    "body",
    [
        b'{"op": "result", "value": 1e999}',
        b'{"op": "result", "value": -1e999}',
        b'{"op": "result", "value": NaN}',
        b'{"op": "result", "value": ' + b"9" * 5000 + b"}",
        b'{"op": "result", "value": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"op": "result", "value": "\xff"}',
        b"[1, 2]",
        b'{"value": 1}',
        b"",
    ],
)
def test_a_message_that_does_not_decode_is_a_channel_error(body: bytes) -> None:
    with delivered(body) as channel, pytest.raises(ChannelError):
        channel.recv()


@given(st.binary(max_size=200))
def test_any_bytes_give_a_message_or_a_channel_error(body: bytes) -> None:
    with delivered(body) as channel:
        try:
            message = channel.recv()
        except (ChannelError, ChannelClosed):
            return
    assert isinstance(message, dict) and isinstance(message["op"], str)


class PeerEndsOnDelivery:
    """A real socket whose peer reads each message as soon as it arrives and then ends (a test
    that ends its own process does): it makes the race that a channel's send must survive happen
    every time."""

    def __init__(self, sock: socket.socket, peer: socket.socket) -> None:
        self._sock, self._peer = sock, peer

    def sendmsg(self, buffers: list[bytes], ancillary: list[tuple[int, int, bytes]]) -> int:
        sent = self._sock.sendmsg(buffers, ancillary)
        self._peer.recvmsg(1 << 16, socket.CMSG_SPACE(64))
        self._peer.close()
        return sent

    def __getattr__(self, name: str) -> object:
        return getattr(self._sock, name)


def test_a_message_with_descriptors_is_sent_though_its_reader_ended_right_after_reading_it() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs, open("/dev/null", "rb") as stdin:
        channel = Channel(PeerEndsOnDelivery(ours, theirs))  # type: ignore[arg-type]
        channel.send({"op": "test"}, fds=(stdin.fileno(),))
