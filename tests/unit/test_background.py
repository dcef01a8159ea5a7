"""An engine's background work (removals, pool refills, session reaping) fails one task at a
time: a task that raises must not cancel the others or refuse the next ones, or slots leak and
every later job waits forever (seen in CI: a docker-py call raised KeyError mid-suite)."""

from __future__ import annotations

import anyio
import pytest
from anyio.abc import TaskStatus

from engine.runtime import BackgroundTasks

pytestmark = pytest.mark.anyio


async def fail() -> None:
    raise KeyError("PYTEST_CURRENT_TEST")


async def test_a_failing_task_ends_neither_the_others_nor_the_next(caplog: pytest.LogCaptureFixture) -> None:
    finished: list[str] = []

    async def work(name: str) -> None:
        await anyio.sleep(0.05)
        finished.append(name)

    async with anyio.create_task_group() as group:
        tasks = BackgroundTasks(group)
        tasks.start_soon(work, "before")
        tasks.start_soon(fail)
        await anyio.sleep(0.01)
        tasks.start_soon(work, "after")
    assert sorted(finished) == ["after", "before"]
    assert "fail" in caplog.text and "KeyError" in caplog.text


async def test_a_task_that_fails_before_it_started_fails_its_caller() -> None:
    async def broken(*, task_status: TaskStatus[bool]) -> None:
        raise KeyError("not ready")

    async with anyio.create_task_group() as group:
        with pytest.raises(KeyError, match="not ready"):
            await BackgroundTasks(group).start(broken)


async def test_a_task_that_fails_after_it_started_is_only_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def follows(*, task_status: TaskStatus[bool]) -> None:
        task_status.started(True)
        await anyio.sleep(0.01)
        raise KeyError("gone")

    async with anyio.create_task_group() as group:
        assert await BackgroundTasks(group).start(follows) is True
    assert "follows" in caplog.text and "KeyError: 'gone'" in caplog.text
