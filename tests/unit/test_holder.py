"""The engine's side of the helper that holds a sandbox's processes stopped (``HOLD_SCRIPT``):
what it reads as an answer. A stand-in process (``ScriptedHolder``) says what the test scripts;
the helper itself is attacked on every runtime in tests/security/test_session_attacks.py."""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest

from engine import SandboxError
from engine.sandboxes._sandbox import Output, Process, _Holder

pytestmark = pytest.mark.anyio


class ScriptedHolder:
    """The process part of the conversation: what the engine sends is kept."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send_stdin(self, data: bytes) -> None:
        self.sent.append(data)


async def _asked(chunks: list[Output], line: bytes | None, answer: bytes) -> list[bytes]:
    send, receive = anyio.create_memory_object_stream[Output](len(chunks) + 1)
    for chunk in chunks:
        send.send_nowait(chunk)
    send.close()
    process = ScriptedHolder()
    with receive:
        await _Holder("0123456789abcdef0123", cast(Process, cast(Any, process)), receive).ask(line, answer=answer)
    return process.sent


async def test_an_answer_that_comes_in_pieces_is_read_whole() -> None:
    pieces = [Output(stream="stdout", data=b"sto"), Output(stream="stdout", data=b"pped\n")]
    assert await _asked(pieces, None, b"stopped") == []


async def test_a_question_is_one_line() -> None:
    assert await _asked([Output(stream="stdout", data=b"ended\n")], b"kill", b"ended") == [b"kill\n"]


@pytest.mark.parametrize(
    ("said", "named"),
    [
        ([Output(stream="stderr", data=b"still running after 200 rounds: 7(R)\n")], "still running after 200 rounds"),
        ([Output(stream="stdout", data=b"stop")], "no answer"),
        ([Output(stream="stdout", data=b"something else\n")], "no answer"),
    ],
)
async def test_no_answer_is_an_error_that_says_what_the_helper_said(said: list[Output], named: str) -> None:
    with pytest.raises(SandboxError, match=f"could not all be stopped: {named}"):
        await _asked(said, None, b"stopped")
