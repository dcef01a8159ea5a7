"""A runtime that never returns must cost one job, never a slot or the engine: the engine's own
bounds end the job and free its slot. Pure bookkeeping, with a fake runtime (no containers)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

import anyio
import pytest

import engine._engine as engine_core
from engine import Engine, Limits, Settings, Submission, Verdict
from engine.runtime import ContainerRef, ContainerSpec, Exchange, LineSink, Runtime

pytestmark = pytest.mark.anyio


class WedgedFakeRuntime(Runtime):
    """Creates containers at once; every job and every removal then hangs forever."""

    name = "wedged-fake"

    def __init__(self) -> None:
        self.numbers = itertools.count()
        self.removals_started = 0

    async def open(self) -> None:
        pass

    async def prepare(self, image: str, announce: Callable[[str], None] = lambda message: None) -> None:
        pass

    async def create(self, spec: ContainerSpec) -> ContainerRef:
        return ContainerRef(id=f"fake-{next(self.numbers)}", spec=spec, uid=61000)

    async def communicate(
        self,
        container: ContainerRef,
        request: bytes,
        *,
        deadline_s: float,
        stdout_limit: int,
        stderr_limit: int,
        on_stdout_line: LineSink | None = None,
    ) -> Exchange:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def exec(
        self,
        container: ContainerRef,
        argv: list[str],
        *,
        stdin: bytes = b"",
        deadline_s: float,
        output_limit: int,
        workdir: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Exchange:
        raise NotImplementedError

    async def remove(self, container: ContainerRef) -> None:
        self.removals_started += 1
        await anyio.sleep_forever()

    async def remove_leftovers(self, *, everything: bool = False, session: str | None = None) -> list[str]:
        return []

    async def list_ours(self) -> list[str]:
        return []

    async def describe(self) -> dict[str, str]:
        return {"version": "fake", "oci_runtimes": "runc"}

    async def image_id(self, tag: str) -> str | None:
        return "sha256:fake"

    async def aclose(self) -> None:
        pass


async def test_wedged_jobs_and_removals_end_and_give_their_slots_back(monkeypatch: pytest.MonkeyPatch) -> None:
    allowances = ("START_ALLOWANCE_S", "PER_TEST_OVERHEAD_S", "RUNTIME_GRACE_S", "REMOVE_TIMEOUT_S")
    for allowance in allowances:
        monkeypatch.setattr(engine_core, allowance, 0.05)
    runtime = WedgedFakeRuntime()
    limits = Limits(wall_time_s=0.05)
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
