"""Every attack runs against every sandbox tier this machine has: runc (the default) and, when
Debian's runsc is registered with dockerd, gVisor. A missing tier is skipped, with the reason."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from engine import Settings, SyncEngine

TIERS = ("runc", "gvisor")


def _gvisor_registered() -> bool:
    client = docker.from_env(version="auto")
    try:
        return "runsc" in (client.info().get("Runtimes") or {})
    finally:
        client.close()


@pytest.fixture(scope="session", params=TIERS)
def tier(request: pytest.FixtureRequest) -> str:
    if request.param == "gvisor" and not _gvisor_registered():
        pytest.skip("gVisor is not registered with dockerd here (scripts/setup --with-gvisor adds it)")
    return str(request.param)


@pytest.fixture(scope="session")
def engine(tier: str) -> Iterator[SyncEngine]:
    """Overrides the suite-wide engine: every test in this folder runs once per tier."""
    with SyncEngine(Settings(isolation=tier)) as sync_engine:  # type: ignore[arg-type]
        yield sync_engine
