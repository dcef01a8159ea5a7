"""Every attack runs against every sandbox this machine can provide: containers through Docker
(runc, and gVisor when Debian's runsc is registered), and runc driven directly (the OCI runtime,
which needs root). A missing one is skipped, with the reason."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import docker
import pytest

from engine import Settings, SyncEngine

SANDBOXES = [("docker", "runc"), ("docker", "gvisor"), ("oci", "runc")]


def _gvisor_registered() -> bool:
    client = docker.from_env(version="auto")
    try:
        return "runsc" in (client.info().get("Runtimes") or {})
    finally:
        client.close()


@pytest.fixture(scope="session", params=SANDBOXES, ids=[f"{r}-{i}" for r, i in SANDBOXES])
def sandbox_kind(request: pytest.FixtureRequest) -> tuple[str, str]:
    runtime, isolation = request.param
    if isolation == "gvisor" and not _gvisor_registered():
        pytest.skip("gVisor is not registered with dockerd here (scripts/setup --with-gvisor adds it)")
    if runtime == "oci" and (os.geteuid() != 0 or shutil.which("runc") is None):
        pytest.skip("the OCI runtime needs root and runc")
    return runtime, isolation


@pytest.fixture(scope="session")
def tier(sandbox_kind: tuple[str, str]) -> str:
    """The kernel boundary: runc (namespaces and seccomp on the host kernel) or gVisor."""
    return sandbox_kind[1]


@pytest.fixture(scope="session")
def engine(sandbox_kind: tuple[str, str]) -> Iterator[SyncEngine]:
    """Overrides the suite-wide engine: every test in this folder runs once per sandbox."""
    runtime, isolation = sandbox_kind
    with SyncEngine(Settings(runtime=runtime, isolation=isolation)) as sync_engine:
        yield sync_engine
