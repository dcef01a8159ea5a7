"""A runtime that never returns must cost one job, never a slot or the engine: the engine's own
bounds end the job and free its slot. Pure bookkeeping, with a fake runtime (no containers)."""

from __future__ import annotations

import anyio
import pytest

import engine._engine as engine_core
from engine import Engine, Limits, Settings, Submission, Verdict
from engine.runtime._images import image_tag
from engine.testing import FakeRuntime

pytestmark = pytest.mark.anyio


async def test_wedged_jobs_and_removals_end_and_give_their_slots_back(monkeypatch: pytest.MonkeyPatch) -> None:
    allowances = ("START_ALLOWANCE_S", "PER_TEST_OVERHEAD_S", "RUNTIME_GRACE_S", "REMOVE_TIMEOUT_S")
    for allowance in allowances:
        monkeypatch.setattr(engine_core, allowance, 0.05)
    # Unstretched: each wedged job then costs about a second, not the 14 s a starved step may take.
    monkeypatch.setattr(engine_core, "STARVED_ALLOWANCE", 0)
    runtime = FakeRuntime(images=[image_tag("python", Settings())], wedge_jobs=True, wedge_removals=True)
    limits = Limits(wall_time_s=0.05, compile_time_s=0.05)
    submissions = [Submission(id=f"s{i}", code="print(1)", tests=[{"kind": "run"}], limits=limits) for i in range(6)]
    # Two slots and six jobs: the later jobs run only if the wedged ones gave their slots back.
    settings = Settings(max_concurrency=2, pool_size=0, retries=3)
    with anyio.fail_after(60):
        async with Engine(settings, runtime=runtime) as engine:
            results = await engine.judge_many(submissions)
    assert [r.id for r in results] == [s.id for s in submissions]
    assert {r.verdict for r in results} == {Verdict.SANDBOX_ERROR}
    assert all("did not end the job" in (r.error.message if r.error else "") for r in results)
    assert runtime.removals_started >= len(submissions)  # one attempt each: a wedge is not retried
