"""Every attack runs against every sandbox this machine can provide: containers through Docker
on each OCI runtime registered with dockerd (crun, runc, and gVisor's runsc), and the OCI runtime
driven directly with each of its binaries (crun and runc; root only). A missing one is skipped,
with the reason."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from dockerd import registered_runtimes
from security.sandboxes import IDS, SANDBOXES, Sandbox

from engine import EngineError, Settings, SyncEngine
from engine.runtime import choose_oci_binary


@pytest.fixture(scope="session", params=SANDBOXES, ids=IDS)
def sandbox_kind(request: pytest.FixtureRequest) -> Sandbox:
    sandbox: Sandbox = request.param
    if sandbox.isolation == "gvisor" and "runsc" not in registered_runtimes():
        pytest.skip("gVisor is not registered with dockerd here (scripts/setup --with-gvisor adds it)")
    if sandbox.runtime == "docker" and sandbox.oci_binary not in (None, *registered_runtimes()):
        pytest.skip(f"{sandbox.oci_binary} is not registered with dockerd here (scripts/setup registers crun)")
    if sandbox.runtime == "oci":
        if os.geteuid() != 0:
            pytest.skip("the OCI runtime needs root")
        try:
            choose_oci_binary(sandbox.oci_binary)
        except EngineError as exc:
            pytest.skip(str(exc))
    return sandbox


@pytest.fixture(scope="session")
def tier(sandbox_kind: Sandbox) -> str:
    """The kernel boundary: runc (namespaces and seccomp on the host kernel) or gVisor."""
    return sandbox_kind.isolation


@pytest.fixture(scope="session")
def engine(sandbox_kind: Sandbox) -> Iterator[SyncEngine]:
    """Overrides the suite-wide engine: every test in this folder runs once per sandbox."""
    settings = Settings(
        runtime=sandbox_kind.runtime, isolation=sandbox_kind.isolation, oci_runtime=sandbox_kind.oci_binary
    )
    with SyncEngine(settings) as sync_engine:
        yield sync_engine
