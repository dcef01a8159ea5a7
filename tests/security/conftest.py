"""Every attack runs against every sandbox this machine can provide: containers through Docker
on each OCI runtime registered with dockerd (crun, runc, and gVisor's runsc), and the OCI runtime
driven directly with each of its binaries (crun and runc; root only). A missing one is skipped,
with the reason.

The attacks on what runs a submission (``IN_PLACE_ATTACKS``) run twice on each: with a process
per test (``process_per_test=True``, the engine's setting here, so plain runs too), and with a
Python submission's tests in one process (the default), the harness's two ways of running a program."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from paused import fresh_paused_dir
from sandboxes import SANDBOXES, Sandbox, ids

from engine import Settings, SyncEngine

IN_PLACE_ATTACKS = {
    "test_any_input",
    "test_attacks",
    "test_boundary_attacks",
    "test_cheats",
    "test_cpu_time",
    "test_judging_attacks",
    "test_white_box",
    "test_writable_places",
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "engine" in metafunc.fixturenames and metafunc.module.__name__.rpartition(".")[2] in IN_PLACE_ATTACKS:
        metafunc.parametrize(
            "process_per_test",
            [True, False],
            ids=["forked-tests", "tests-in-one-process"],
            indirect=True,
            scope="session",
        )


@pytest.fixture(scope="session")
def process_per_test(request: pytest.FixtureRequest) -> bool:
    default: bool = Settings.model_fields["process_per_test"].default
    return bool(getattr(request, "param", default))


@pytest.fixture(scope="session", params=SANDBOXES, ids=ids(SANDBOXES))
def sandbox_kind(request: pytest.FixtureRequest) -> Sandbox:
    sandbox: Sandbox = request.param
    return sandbox.require()


@pytest.fixture(scope="session")
def tier(sandbox_kind: Sandbox) -> str:
    """The kernel boundary: runc (namespaces and seccomp on the host kernel) or gVisor."""
    return sandbox_kind.isolation


@pytest.fixture(scope="session")
def engine(sandbox_kind: Sandbox, process_per_test: bool) -> Iterator[SyncEngine]:
    """Overrides the suite-wide engine: every test in this folder runs once per sandbox."""
    settings = Settings(
        runtime=sandbox_kind.runtime,
        isolation=sandbox_kind.isolation,
        oci_runtime=sandbox_kind.oci_binary,
        paused_dir=fresh_paused_dir(),
        process_per_test=process_per_test,
    )
    with SyncEngine(settings) as sync_engine:
        yield sync_engine
