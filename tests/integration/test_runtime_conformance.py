"""Every runtime this machine offers passes the conformance kit the fake runtime passes."""

from __future__ import annotations

import os
import shutil

import pytest

from engine import Settings, SyncEngine
from engine._labels import Owner
from engine.runtime import DockerRuntime, OciRuntime, Runtime, UidPool
from engine.testing import check_runtime

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

SETTINGS = Settings()


def docker_runtime() -> Runtime:
    return DockerRuntime(Owner(), UidPool(SETTINGS.sandbox_uid_first, SETTINGS.sandbox_uid_count))


def oci_runtime() -> Runtime:
    return OciRuntime(Owner(), UidPool(SETTINGS.sandbox_uid_first, SETTINGS.sandbox_uid_count))


@pytest.mark.parametrize(
    ("make", "isolation"),
    [(docker_runtime, "runc"), (docker_runtime, "gvisor"), (oci_runtime, "runc")],
    ids=["docker-runc", "docker-gvisor", "oci-runc"],
)
async def test_the_runtime_conforms(make: object, isolation: str, engine: SyncEngine) -> None:
    if make is oci_runtime and (os.geteuid() != 0 or shutil.which("runc") is None):
        pytest.skip("the OCI runtime needs root and runc")
    if isolation == "gvisor":
        runtime = docker_runtime()
        await runtime.open()
        try:
            if "gvisor" not in (await runtime.describe()).isolations:
                pytest.skip("gVisor is not registered with dockerd here (scripts/setup --with-gvisor adds it)")
        finally:
            await runtime.aclose()
    image = engine.image_for("python")
    if make is oci_runtime:
        runtime = oci_runtime()
        await runtime.open()
        try:
            await runtime.prepare(image)
        finally:
            await runtime.aclose()
    await check_runtime(make, image, isolation)  # type: ignore[arg-type]
