"""A verdict does not depend on how busy the machine is: the same programs judged alone and judged
twelve at a time beside two CPU hogs get the same verdicts, for every program that uses at most
40% of its CPU time limit (and for one far past it). ``scripts/bench load`` measures the same on
a whole data set."""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Iterator

import pytest

from engine import Limits, Settings, StdinTest, Submission, SyncEngine

pytestmark = pytest.mark.docker

BUSY = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\nprint('ok')"


def _hog() -> None:
    while True:
        pass


@contextlib.contextmanager
def hogs() -> Iterator[None]:
    """One process spinning per core, as a trainer's data loaders do beside the reward."""
    spinning = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(max(1, multiprocessing.cpu_count()))]
    for process in spinning:
        process.start()
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
            process.join()


def submissions() -> list[Submission]:
    limits = Limits(time_s=1)
    chosen = [0.4] * 8 + [0.05] * 3 + [3.0]
    return [
        Submission(
            id=str(seconds), code=BUSY.format(seconds=seconds), tests=[StdinTest(expected_output="ok")], limits=limits
        )
        for seconds in chosen
    ]


def test_verdicts_are_the_same_quiet_and_loaded() -> None:
    with SyncEngine(Settings(max_concurrency=1, pool_size=0)) as engine:
        quiet = engine.judge_many(submissions())
    with hogs(), SyncEngine(Settings(max_concurrency=12, pool_size=0)) as engine:
        loaded = engine.judge_many(submissions())
    assert [r.verdict.value for r in quiet] == ["passed"] * 11 + ["timeout"]
    assert [r.verdict.value for r in loaded] == [r.verdict.value for r in quiet], [
        (r.id, r.verdict.value, r.tests[0].usage, r.tests[0].detail) for r in loaded
    ]
    for result in loaded[:8]:
        assert result.tests[0].usage.cpu_time_s is not None and result.tests[0].usage.cpu_time_s < 0.6
