"""Every runtime this machine offers passes the conformance kit the fake runtime passes."""

from __future__ import annotations

import functools
import os
import shutil

import pytest
from dockerd import registered_runtimes

from engine import Limits, RuntimeUnavailable, Settings, SyncEngine
from engine._labels import Owner
from engine._policy import Policy
from engine.runtime import ContainerSpec, DockerRuntime, OciRuntime, Runtime, UidPool
from engine.testing import check_runtime

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

SETTINGS = Settings()


def docker_runtime(oci_binary: str | None = None) -> DockerRuntime:
    uids = UidPool(SETTINGS.sandbox_uid_first, SETTINGS.sandbox_uid_count)
    return DockerRuntime(Owner(), uids, oci_binary=oci_binary)


def oci_runtime() -> Runtime:
    return OciRuntime(Owner(), UidPool(SETTINGS.sandbox_uid_first, SETTINGS.sandbox_uid_count))


@pytest.mark.parametrize(
    ("make", "isolation"),
    [
        (functools.partial(docker_runtime, "crun"), "runc"),
        (functools.partial(docker_runtime, "runc"), "runc"),
        (docker_runtime, "gvisor"),
        (oci_runtime, "runc"),
    ],
    ids=["docker-crun", "docker-runc", "docker-gvisor", "oci"],
)
async def test_the_runtime_conforms(make: object, isolation: str, engine: SyncEngine) -> None:
    if make is oci_runtime and (os.geteuid() != 0 or shutil.which("runc") is None):
        pytest.skip("the OCI runtime needs root and runc")
    if isinstance(make, functools.partial) and make.args[0] not in registered_runtimes():
        pytest.skip(f"{make.args[0]} is not registered with dockerd here (scripts/setup registers crun)")
    if isolation == "gvisor" and "runsc" not in registered_runtimes():
        pytest.skip("gVisor is not registered with dockerd here (scripts/setup --with-gvisor adds it)")
    image = engine.image_for("python")
    if make is oci_runtime:
        runtime = oci_runtime()
        await runtime.open()
        try:
            await runtime.prepare(image)
        finally:
            await runtime.aclose()
    await check_runtime(make, image, isolation)  # type: ignore[arg-type]


async def test_the_docker_runtime_runs_its_runc_tier_on_the_oci_runtime_it_chose(engine: SyncEngine) -> None:
    """crun when dockerd has it (the default), runc when asked, a clear refusal for a runtime
    dockerd lacks; checked on the container dockerd created."""
    registered = registered_runtimes()
    spec = ContainerSpec(image=engine.image_for("python"), policy=Policy.for_purpose(Limits(), "runc"))
    expected = {None: "crun" if "crun" in registered else "runc", "runc": "runc"}
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
