"""The warm pool's bookkeeping, with fake create/remove functions (no containers involved)."""

from __future__ import annotations

import itertools

import anyio
import pytest

from engine import Limits
from engine._errors import SandboxError
from engine.runtime import BackgroundTasks, ContainerRef, ContainerSpec
from engine.runtime._policy import Policy
from engine.runtime._pool import WarmPool

pytestmark = pytest.mark.anyio


class FakeContainers:
    """Stands in for a runtime's create/remove: numbered containers, with an optional failure."""

    def __init__(self) -> None:
        self.numbers = itertools.count()
        self.created: list[str] = []
        self.removed: list[str] = []
        self.fail = False

    async def create(self, spec: ContainerSpec) -> ContainerRef:
        await anyio.sleep(0.01)
        if self.fail:
            raise SandboxError("the fake engine refuses")
        container = ContainerRef(id=f"{spec.image}-{next(self.numbers)}", spec=spec, uid=61000)
        self.created.append(container.id)
        return container

    async def remove(self, container: ContainerRef) -> None:
        self.removed.append(container.id)


def spec(image: str = "a") -> ContainerSpec:
    return ContainerSpec(image=image, policy=Policy.for_purpose(Limits(), "runc"))


async def settle() -> None:
    await anyio.sleep(0.1)


async def test_first_take_misses_then_the_pool_fills_and_hits() -> None:
    fake = FakeContainers()
    async with anyio.create_task_group() as tasks:
        pool = WarmPool(fake.create, fake.remove, 3, BackgroundTasks(tasks))
        first = await pool.take(spec())
        await settle()
        assert repr(pool) == "<WarmPool [ready: 3 | starting: 0 | hits: 0, misses: 1, failures: 0]>"
        second = await pool.take(spec())
        assert second.id != first.id and second.id in fake.created
        await settle()
        stats = pool.statistics()
        assert (stats.ready, stats.hits, stats.misses) == (3, 1, 1)
        await pool.close()
    assert len(fake.removed) == 3
    assert first.id not in fake.removed  # taken containers are the job's to remove


async def test_every_container_is_handed_out_once() -> None:
    fake = FakeContainers()
    async with anyio.create_task_group() as tasks:
        pool = WarmPool(fake.create, fake.remove, 2, BackgroundTasks(tasks))
        taken = [await pool.take(spec()) for _ in range(20)]
        await pool.close()
    assert len({c.id for c in taken}) == 20
    assert set(fake.created) == {c.id for c in taken} | set(fake.removed)


async def test_the_bound_holds_across_kinds_and_the_oldest_kind_is_evicted() -> None:
    fake = FakeContainers()
    async with anyio.create_task_group() as tasks:
        pool = WarmPool(fake.create, fake.remove, 2, BackgroundTasks(tasks))
        await pool.take(spec("a"))
        await settle()
        await pool.take(spec("b"))
        await settle()
        stats = pool.statistics()
        assert stats.ready + stats.starting <= 2
        assert all(c.startswith("a-") for c in fake.removed) and fake.removed
        assert (await pool.take(spec("b"))).id.startswith("b-")
        await pool.close()


async def test_a_pool_of_size_zero_only_creates_on_demand() -> None:
    fake = FakeContainers()
    async with anyio.create_task_group() as tasks:
        pool = WarmPool(fake.create, fake.remove, 0, BackgroundTasks(tasks))
        await pool.take(spec())
        await settle()
        assert pool.statistics().ready == 0 and len(fake.created) == 1


async def test_failures_to_warm_are_counted_and_takes_still_work() -> None:
    fake = FakeContainers()
    async with anyio.create_task_group() as tasks:
        pool = WarmPool(fake.create, fake.remove, 2, BackgroundTasks(tasks))
        await pool.take(spec())
        fake.fail = True  # the two refills started by that take will fail
        await settle()
        fake.fail = False
        assert pool.statistics().failures == 2
        assert (await pool.take(spec())).id  # served on demand
        assert pool.statistics().misses == 2
        await pool.close()


async def test_containers_that_finish_starting_after_close_are_removed() -> None:
    fake = FakeContainers()
    async with anyio.create_task_group() as tasks:
        pool = WarmPool(fake.create, fake.remove, 3, BackgroundTasks(tasks))
        await pool.take(spec())
        await pool.close()  # the three refills are still starting
    await settle()
    assert len(fake.removed) == 3 and pool.statistics().ready == 0
