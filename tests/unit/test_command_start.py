"""What the engine reads of a command's start (``_read_pid``): the pid its wrapper prints before
the command runs. An exec that ended with nothing at all is told apart from one that said why
it failed, since only the first may be started again (``Sandbox.start``). A stand-in for the
runtime's command (``ScriptedExec``) plays back what the test scripts."""

from __future__ import annotations

from typing import Any, cast

import pytest

from engine import SandboxError
from engine.sandboxes._sandbox import _NothingCameBack, _read_pid

pytestmark = pytest.mark.anyio


class ScriptedExec:
    def __init__(self, chunks: list[tuple[str, bytes]], status: int | None = None) -> None:
        self.chunks = list(chunks)
        self.status = status

    async def receive(self) -> tuple[str, bytes] | None:
        return self.chunks.pop(0) if self.chunks else None

    async def exit_code(self) -> int | None:
        return self.status


async def read(chunks: list[tuple[str, bytes]], status: int | None = None) -> Any:
    return await _read_pid(cast(Any, ScriptedExec(chunks, status)))


async def test_the_pid_comes_with_what_came_before_it() -> None:
    pid, early = await read([("stderr", b"warning\n"), ("stdout", b"4"), ("stdout", b"2\nout")])
    assert pid == 42
    assert [(o.stream, o.data) for o in early] == [("stderr", b"warning\n"), ("stdout", b"out")]


@pytest.mark.parametrize("line", [b"42\n", b"42\r\n", b"42\r\r\n"])
async def test_a_pid_line_may_end_as_a_terminal_ends_it(line: bytes) -> None:
    """CR CR LF is what a command on a terminal under runc printed beside a loaded machine, one
    start in forty: the command ran, and was taken for one that had not."""
    pid, early = await read([("stdout", line + b"on-a-terminal\r\r\n")])
    assert pid == 42
    assert [(o.stream, o.data) for o in early] == [("stdout", b"on-a-terminal\r\r\n")]


async def test_an_exec_that_ended_with_nothing_may_be_started_again() -> None:
    with pytest.raises(_NothingCameBack, match=r"its exec ended with status 126"):
        await read([], status=126)


@pytest.mark.parametrize(
    "chunks",
    [[("stderr", b"exec failed: resource temporarily unavailable")], [("stdout", b"not a pid\n")], [("stdout", b"12")]],
)
async def test_an_exec_that_said_why_it_failed_is_not(chunks: list[tuple[str, bytes]]) -> None:
    with pytest.raises(SandboxError, match="a command could not start") as raised:
        await read(chunks)
    assert not isinstance(raised.value, _NothingCameBack)
