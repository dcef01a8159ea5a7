"""Every attack runs against every sandbox this machine can provide: containers through Docker
on each OCI runtime registered with dockerd (crun, runc, and gVisor's runsc), and the OCI runtime
driven directly with each of its binaries (crun and runc; root only). A missing one is skipped,
with the reason."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from paused import fresh_paused_dir
from sandboxes import SANDBOXES, Sandbox, ids

from engine import Settings, SyncEngine


@pytest.fixture(scope="session", params=SANDBOXES, ids=ids(SANDBOXES))
def sandbox_kind(request: pytest.FixtureRequest) -> Sandbox:
    sandbox: Sandbox = request.param
    return sandbox.require()


@pytest.fixture(scope="session")
def tier(sandbox_kind: Sandbox) -> str:
    """The kernel boundary: runc (namespaces and seccomp on the host kernel) or gVisor."""
    return sandbox_kind.isolation


@pytest.fixture(scope="session")
def engine(sandbox_kind: Sandbox) -> Iterator[SyncEngine]:
    """Overrides the suite-wide engine: every test in this folder runs once per sandbox."""
    settings = Settings(
        runtime=sandbox_kind.runtime,
        isolation=sandbox_kind.isolation,
        oci_runtime=sandbox_kind.oci_binary,
        paused_dir=fresh_paused_dir(),
    )
    with SyncEngine(settings) as sync_engine:
        yield sync_engine
