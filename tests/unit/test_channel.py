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
