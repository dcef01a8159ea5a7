"""Every runtime this machine offers passes the conformance kit the fake runtime passes."""

from __future__ import annotations

import base64
import functools
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from dockerd import registered_runtimes
from sandboxes import OCI, OCI_BINARIES, OCI_SANDBOXES, SANDBOXES, Sandbox, ids

from engine import Limits, RuntimeUnavailable, Settings, SyncEngine
from engine.runtime import ContainerSpec, DockerRuntime, OciRuntime, Runtime, UidPool
from engine.runtime._labels import Owner
from engine.runtime._oci import SECCOMP_BPF_ANNOTATION
from engine.runtime._policy import Policy, Purpose
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


@pytest.mark.parametrize("purpose", list(Purpose))
async def test_crun_applies_our_profile_compiled_once_exactly_as_it_compiles_it_for_a_container(
    engine: SyncEngine, purpose: Purpose
) -> None:
    """crun is handed our profile compiled once, at open (the BPF annotation), instead of
    compiling it for every container: a job's, and a sandbox's (loopback sockets). Each container
    must get, byte for byte, what crun compiles from the config's profile when it has to: compared
    here with a container made without it."""
    crun = next(kind for kind in OCI_SANDBOXES if kind.oci_binary == "crun").require()
    assert crun.oci_binary is not None
    runtime = oci_runtime(crun.oci_binary)
    state_folder = OCI_STATE / crun.oci_binary
    await runtime.open()
    policy = Policy.for_purpose(Limits(), "runc", purpose)
    spec = ContainerSpec(image=engine.image_for("python"), policy=policy)
    applied = []
    try:
        compiled_once = dict(runtime._seccomp_bpf)
        assert compiled_once[False] != compiled_once[True]
        # The second container: crun compiles the profile in its config, as it would without us.
        for precompiled in (compiled_once, {}):
            runtime._seccomp_bpf = precompiled
            container = await runtime.create(spec)
            try:
                config = json.loads((OCI_STATE / "bundles" / container.id / "config.json").read_text())
                assert (SECCOMP_BPF_ANNOTATION in config["annotations"]) is bool(precompiled)
                assert config["linux"]["seccomp"]["defaultAction"] == "SCMP_ACT_ERRNO"
                # The filter is written before the container's process starts, which the job's run does on its own.
                state = [crun.oci_binary, "--root", str(state_folder), "state", container.id]
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    shown = await anyio.run_process(state, check=False)
                    if shown.returncode == 0 and json.loads(shown.stdout)["status"] == "running":
                        break
                    await anyio.sleep(0.01)
                applied.append((state_folder / container.id / "seccomp.bpf").read_bytes())
            finally:
                await runtime.remove(container)
    finally:
        await runtime.aclose()
    assert applied[0] == applied[1] == base64.b64decode(compiled_once[policy.loopback_sockets])
    assert len(applied[0]) > 1000  # hundreds of instructions: our profile, not an empty filter
