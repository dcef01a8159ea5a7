"""Every runtime this machine offers passes the conformance kit the fake runtime passes."""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from dockerd import registered_runtimes
from sandboxes import OCI, OCI_BINARIES, SANDBOXES, Sandbox, ids

from engine import Limits, RuntimeUnavailable, Settings, SyncEngine
from engine.runtime import ContainerSpec, DockerRuntime, OciRuntime, Runtime, UidPool
from engine.runtime._labels import Owner
from engine.runtime._policy import Policy
from engine.testing import check_runtime

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

SETTINGS = Settings()
OCI_STATE = Path("/var/lib/airlock/oci")


def docker_runtime(oci_binary: str | None = None) -> DockerRuntime:
    uids = UidPool(SETTINGS.sandbox_uid_first, SETTINGS.sandbox_uid_count)
    return DockerRuntime(Owner(), uids, oci_binary=oci_binary)


def oci_runtime(oci_binary: str | None = None) -> OciRuntime:
    return OciRuntime(Owner(), UidPool(SETTINGS.sandbox_uid_first, SETTINGS.sandbox_uid_count), binary=oci_binary)


@pytest.mark.parametrize("kind", SANDBOXES, ids=ids(SANDBOXES))
async def test_the_runtime_conforms(kind: Sandbox, engine: SyncEngine) -> None:
    kind.require()
    image = engine.image_for("python")
    make: Callable[[], Runtime]
    if kind.runtime == "oci":
        make = functools.partial(oci_runtime, kind.oci_binary)
        runtime = make()
        await runtime.open()
        try:
            await runtime.prepare(image)
        finally:
            await runtime.aclose()
    else:
        make = functools.partial(docker_runtime, kind.oci_binary)
    await check_runtime(make, image, kind.isolation)


async def test_the_docker_runtime_runs_its_runc_tier_on_the_oci_runtime_it_chose(engine: SyncEngine) -> None:
    """crun when dockerd has it (the default), runc when asked, a clear refusal for a runtime
    dockerd lacks; checked on the container dockerd created."""
    registered = registered_runtimes()
    spec = ContainerSpec(image=engine.image_for("python"), policy=Policy.for_purpose(Limits(), "runc"))
    expected = {None: next(binary for binary in OCI_BINARIES if binary in registered), "runc": "runc"}
    for wanted, used in expected.items():
        runtime = docker_runtime(wanted)
        await runtime.open()
        try:
            container = await runtime.create(spec)
            try:
                assert runtime.api.inspect_container(container.id)["HostConfig"]["Runtime"] == used
            finally:
                await runtime.remove(container)
        finally:
            await runtime.aclose()
    with pytest.raises(RuntimeUnavailable, match="dockerd has no runtime named 'no-such-runtime'"):
        await docker_runtime("no-such-runtime").open()


async def test_a_sweep_leaves_a_bundle_another_engine_is_making_and_removes_an_abandoned_one() -> None:
    """A bundle's folder comes a moment before its labels: an engine that started then took
    another engine's new container for a dead engine's leftover and removed it under a live
    sandbox (its next command: "error opening file .../status")."""
    OCI.require()
    runtime = oci_runtime()
    await runtime.open()
    try:
        bundles = OCI_STATE / "bundles"
        being_made, abandoned = (bundles / f"airlock-{secrets.token_hex(12)}" for _ in range(2))
        for bundle in (being_made, abandoned):
            (bundle / "rootfs").mkdir(parents=True)
        long_ago = time.time() - 3600
        os.utime(abandoned, (long_ago, long_ago))
        try:
            stale = await runtime.remove_leftovers()
            assert abandoned.name in stale and not abandoned.exists()
            assert being_made.name not in stale and being_made.exists()
        finally:
            shutil.rmtree(being_made, ignore_errors=True)
            shutil.rmtree(abandoned, ignore_errors=True)
    finally:
        await runtime.aclose()
