from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from engine import Limits, Settings, SyncEngine
from engine._labels import MANAGED


def _ours() -> list[str]:
    client = docker.from_env(version="auto")
    try:
        # The low-level list: one call, no per-container inspection that races with removals.
        return [c["Id"] for c in client.api.containers(all=True, filters={"label": f"{MANAGED}=true"})]
    finally:
        client.close()


OCI_BUNDLES = Path("/var/lib/airlock/oci/bundles")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Nothing we create may outlive the suite: leftover containers fail the run."""
    try:
        leftovers = _ours()
    except docker.errors.DockerException:
        return
    leftovers += [bundle.name for bundle in OCI_BUNDLES.glob("airlock-*")]
    if leftovers:
        session.config.get_terminal_writer().line(f"LEFTOVER CONTAINERS AFTER THE SUITE: {leftovers}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def engine() -> Iterator[SyncEngine]:
    # No warm pool: tests that look for leftover containers must not find this engine's stock.
    with SyncEngine(Settings(pool_size=0)) as sync_engine:
        yield sync_engine


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def small_limits() -> Limits:
    return Limits(wall_time_s=5, memory_mb=128, tmpfs_mb=8, shm_mb=4, pids=64, output_bytes=64 * 1024)
