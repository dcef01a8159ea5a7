from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import paused
import psutil
import pytest
from compat.external import install_ahead, prepare_reference_ahead
from leftovers import our_containers
from sandboxes import Sandbox
from templates import built_template

from engine import Limits, Settings, SyncEngine
from engine.runtime._labels import lease_released, run_dir
from engine.runtime._uids import default_lock_dir

OCI_BUNDLES = Path("/var/lib/airlock/oci/bundles")


_STARTED = pytest.StashKey[float]()
# scripts/test runs the whole suite in three parts: "beside" (the attacks on the OCI runtime and
# gVisor, which need no dockerd restart and count no one's containers) in a process of its own
# while "main" runs, then "alone" (the tests that restart dockerd or count every container).
PART = os.environ.get("AIRLOCK_TEST_PART", "")
# When the first part started: the leftover check at the end of the last part covers them all.
SINCE = float(os.environ.get("AIRLOCK_TEST_SINCE", "0") or 0)
ALONE = ("faults/", "integration/test_ray.py")


def part_of(item: pytest.Item) -> str:
    where = item.path.relative_to(Path(__file__).parent).as_posix()
    if where.startswith(ALONE):
        return "alone"
    callspec = getattr(item, "callspec", None)
    kinds = [value for value in callspec.params.values() if isinstance(value, Sandbox)] if callspec else []
    # Every tier but Docker's own runc, the main part's: the parts take about as long.
    if any(kind.runtime == "oci" or kind.isolation == "gvisor" or kind.oci_binary == "crun" for kind in kinds):
        return "beside"
    # The operator's template is built once per process: every test of it in one part.
    return "beside" if "operator_template" in getattr(item, "fixturenames", ()) else "main"


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_STARTED] = SINCE or time.time()
    # Each engine that pauses to disk is given a folder of this run's (paused.py): one named for
    # all would be held by the first engine's process alone.
    os.environ.pop("AIRLOCK_PAUSED_DIR", None)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Only this process's part, if it runs one; tests that need reference packages run last,
    so that the packages install while the others run (a cold install takes minutes); the rest
    keep pytest's order."""
    if PART:
        others = [item for item in items if part_of(item) != PART]
        if others:
            config.hook.pytest_deselected(items=others)
            items[:] = [item for item in items if part_of(item) == PART]
    items.sort(key=lambda item: bool(_preparations(item)))


def pytest_collection_finish(session: pytest.Session) -> None:
    for item in session.items:
        for start in _preparations(item):
            start()


def _preparations(item: pytest.Item) -> list[Callable[[], object]]:
    """What must be installed before ``item`` runs, each as a call that starts it in the background."""
    found: list[Callable[[], object]] = []
    installs = item.get_closest_marker("installs")
    if installs is not None:
        packages = tuple(installs.args)
        found.append(lambda: install_ahead(packages))
    if item.get_closest_marker("reference") is not None:
        found.append(prepare_reference_ahead)
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Nothing we create may outlive the suite: leftover containers fail the run (checked by the
    last part where the suite runs in parts: the others still have theirs)."""
    if kept := paused.kept_files():
        session.config.get_terminal_writer().line(f"SANDBOXES LEFT PAUSED ON DISK, OR SNAPSHOTS: {kept}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    paused.remove_run_dir()
    if PART in ("beside", "main"):
        return
    try:
        leftovers = our_containers()
    except docker.errors.DockerException:
        return
    leftovers += [bundle.name for bundle in OCI_BUNDLES.glob("airlock-*")]
    # Volumes and the views of them made for containers are mounts on the host.
    ours = tuple(str(run_dir(name)) + "/" for name in ("volumes", "volume-views"))
    mounted = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    leftovers += [f"mount {where}" for where in mounted if where.startswith(ours)]
    leftovers += [f"uid lease {lease.name}" for lease in default_lock_dir().glob("[0-9]*")]
    # The suite's engines give their leases up when they close, and the next engine to start
    # deletes those of engines the suite killed.
    started = session.config.stash.get(_STARTED, time.time())
    leftovers += [
        f"owner lease {lease.name}"
        for lease in run_dir("owners").glob("*")
        if lease.stat().st_mtime >= started and lease_released(lease.name, lease.parent)
    ]
    if leftovers:
        session.config.get_terminal_writer().line(f"LEFTOVER CONTAINERS AFTER THE SUITE: {leftovers}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _host_state() -> str:
    """What a failure elsewhere (a CI machine) needs to be understood: the host's load and the
    processes that could be stuck around our containers."""
    counts = {"processes": 0, "threads": 0, "uninterruptible": 0, "zombies": 0}
    runtimes = []
    for process in psutil.process_iter(["name", "status", "num_threads"]):
        info = process.info
        counts["processes"] += 1
        counts["threads"] += info["num_threads"] or 0
        counts["uninterruptible"] += info["status"] == psutil.STATUS_DISK_SLEEP
        counts["zombies"] += info["status"] == psutil.STATUS_ZOMBIE
        if info["name"] in ("runc", "runsc", "runsc-sandbox", "runsc-gofer", "containerd-shim-runc-v2"):
            runtimes.append(f"{info['name']}:{info['status']}")
    load = ", ".join(f"{value:.1f}" for value in psutil.getloadavg())
    memory = psutil.virtual_memory().available // 2**20
    return f"{counts}; load {load}; {memory} MiB available; runtime processes {sorted(runtimes)[:20]}"


_FIRST_FAILURE = pytest.StashKey[str]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    outcome: Any = yield
    report = outcome.get_result()
    if report.failed and not item.config.stash.get(_FIRST_FAILURE, ""):
        item.config.stash[_FIRST_FAILURE] = f"{item.nodeid}: {_host_state()}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    first = terminalreporter.config.stash.get(_FIRST_FAILURE, "")
    if first:
        terminalreporter.write_line(f"host at the first failure: {first}")
        terminalreporter.write_line(f"host at the end: {_host_state()}")


@pytest.fixture(scope="session")
def engine() -> Iterator[SyncEngine]:
    # No warm pool: tests that look for leftover containers must not find this engine's stock.
    with SyncEngine(Settings(pool_size=0)) as sync_engine:
        yield sync_engine


@pytest.fixture(scope="session")
def language_images() -> None:
    """Every language's image, built here when missing (the first run takes a few minutes)."""
    from engine.runtime._images import IMAGES, build_images

    build_images(Settings(), IMAGES, log=lambda line: None)


@pytest.fixture(scope="session")
def operator_template(language_images: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A sandbox template of the operator's own (tests/templates.py), built once; its name."""
    with built_template(tmp_path_factory.mktemp("template")) as name:
        yield name


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def small_limits() -> Limits:
    return Limits(wall_time_s=5, memory_mb=128, tmpfs_mb=8, shm_mb=4, pids=64, output_bytes=64 * 1024)
