"""One isolation policy, translated twice: both runtimes must look at every field of it (use it,
or refuse a value they cannot honour), so that a field added to the policy cannot be forgotten
by either translation. Pure translation: no daemon, no runc."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker
import pytest

from engine import Limits, SandboxError
from engine.runtime import ContainerSpec
from engine.runtime._docker import container_config
from engine.runtime._oci import oci_config
from engine.runtime._policy import Policy, Purpose, Scratch
from engine.runtime._volumes import VolumeBind

BASE = Policy.for_purpose(Limits(), "runc", Purpose.JOB)
# One value per field that differs from the job policy's.
VARIANTS: dict[str, Any] = {
    "isolation": "gvisor",
    "command": ("sleep", "1"),
    "init": True,
    "harness_as_root": True,
    "capabilities": ("KILL",),
    "hostname": "elsewhere",
    "workdir": "/work",
    "environment": (("HOME", "/work"),),
    "read_only_root": False,
    "scratch": (Scratch(destination="/tmp", size_mb=3, inodes=100),),
    "volumes": (VolumeBind(source="/run/airlock/view", destination="/mnt/data"),),
    "loopback_sockets": True,
    "memory_bytes": BASE.memory_bytes * 2,
    "cpus": BASE.cpus / 2,
    "pids": BASE.pids + 1,
    "processes_per_user": 7,
    "open_files": BASE.open_files + 1,
    "file_size_bytes": BASE.file_size_bytes + 1,
}


def docker_translation(policy: Policy) -> str:
    # A client with a fixed API version builds configs without talking to any daemon.
    api = docker.APIClient(base_url="unix:///nonexistent.sock", version="1.41")
    return json.dumps(container_config(api, ContainerSpec(image="image", policy=policy), 61000, None), sort_keys=True)


def oci_translation(policy: Policy) -> str:
    spec = ContainerSpec(image="image", policy=policy)
    return json.dumps(oci_config(spec, "id", Path("/rootfs"), ["harness"], 61000, Path("/etc-files")), sort_keys=True)


def test_every_field_has_a_variant() -> None:
    assert set(VARIANTS) == set(Policy.model_fields)


@pytest.mark.parametrize("translate", [docker_translation, oci_translation], ids=["docker", "oci"])
@pytest.mark.parametrize("field", sorted(VARIANTS))
def test_each_translation_looks_at_every_field(translate: Any, field: str) -> None:
    changed = BASE.model_copy(update={field: VARIANTS[field]})
    try:
        translated = translate(changed)
    except SandboxError:
        return  # refused: the runtime cannot honour that value, and says so
    assert translated != translate(BASE), f"{translate.__name__} ignores Policy.{field}"


def test_the_purposes_differ_where_they_should() -> None:
    job, sandbox = (Policy.for_purpose(Limits(), "gvisor", purpose) for purpose in Purpose)
    assert job.harness_as_root and not sandbox.harness_as_root
    assert sandbox.init and sandbox.command and not job.command
    assert job.processes_per_user == Limits().pids


@pytest.mark.parametrize("translate", [docker_translation, oci_translation], ids=["docker", "oci"])
def test_each_translation_gives_an_owned_scratch_to_the_user(translate: Any) -> None:
    shared = Scratch(destination="/home/user", size_mb=3, inodes=100)
    owned = shared.model_copy(update={"owned": True})
    as_shared, as_owned = (translate(BASE.model_copy(update={"scratch": (s,)})) for s in (shared, owned))
    assert as_shared != as_owned and "uid=61000" in as_owned and "uid=61000" not in as_shared


def test_docker_refuses_a_volume_on_the_gvisor_tier() -> None:
    gvisor = Policy.for_purpose(Limits(), "gvisor", Purpose.SANDBOX)
    with pytest.raises(SandboxError, match="not offered on the gVisor tier"):
        docker_translation(gvisor.model_copy(update={"volumes": VARIANTS["volumes"]}))
