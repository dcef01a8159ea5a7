"""A sandbox's root on the OCI runtime, as its config says it: uid 0 of a user namespace of the
container's own, mapped to a second unprivileged host uid, with a few capabilities that reach only
what that namespace holds. Pure translation: no runtime binary. The attacks on it are in
tests/security/test_sandbox_root.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine import Limits
from engine.runtime import ContainerSpec
from engine.runtime._oci import ROOT_CAPABILITIES, oci_config, oci_process
from engine.runtime._policy import Purpose, policy_for

USER, ROOT = 61000, 61001
SANDBOX = policy_for(Limits(), "runc", Purpose.SANDBOX)
# Each of these reaches past a user namespace's own objects, or into the kernel.
NEVER_GRANTED = {
    "CAP_SYS_ADMIN",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_SYS_PTRACE",
    "CAP_SYS_MODULE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_CHROOT",
    "CAP_MKNOD",
    "CAP_SETPCAP",
    "CAP_SETFCAP",
    "CAP_DAC_READ_SEARCH",
    "CAP_SYS_TIME",
    "CAP_SYS_BOOT",
    "CAP_BPF",
    "CAP_PERFMON",
    "CAP_LINUX_IMMUTABLE",
    "CAP_IPC_LOCK",
    "CAP_AUDIT_WRITE",
}


def config(root_uid: int | None) -> dict[str, Any]:
    spec = ContainerSpec(image="image", policy=SANDBOX)
    return oci_config(spec, "id", Path("/rootfs"), [], USER, Path("/etc-files"), root_uid)


def test_a_sandbox_with_a_root_maps_only_its_two_uids() -> None:
    linux = config(ROOT)["linux"]
    assert {"type": "user"} in linux["namespaces"]
    mapping = [{"containerID": 0, "hostID": ROOT, "size": 1}, {"containerID": USER, "hostID": USER, "size": 1}]
    assert linux["uidMappings"] == mapping and linux["gidMappings"] == mapping
    # The /dev the runtime makes belongs to the namespace's root: read-only, as everything but scratch.
    assert "/dev" in linux["readonlyPaths"]


def test_without_a_root_there_is_no_user_namespace() -> None:
    linux = config(None)["linux"]
    assert {"type": "user"} not in linux["namespaces"] and "uidMappings" not in linux


def test_the_terminals_group_is_named_only_where_it_exists() -> None:
    """gid 5 (tty) is not mapped in the namespace, and the kernel refuses devpts with it."""

    def devpts(root_uid: int | None) -> list[str]:
        options: list[str] = next(m for m in config(root_uid)["mounts"] if m["type"] == "devpts")["options"]
        return options

    assert "gid=5" in devpts(None) and "gid=5" not in devpts(ROOT)


def test_roots_commands_get_few_capabilities_and_no_new_privileges() -> None:
    process = oci_process(SANDBOX, USER, ["id"], cwd="/", as_root=True)
    assert process["user"]["uid"] == 0 and process["user"]["gid"] == 0
    capabilities = process["capabilities"]
    for kind in ("bounding", "effective", "permitted"):
        assert capabilities[kind] == ROOT_CAPABILITIES
    assert capabilities["inheritable"] == [] and capabilities["ambient"] == []
    assert not NEVER_GRANTED & set(ROOT_CAPABILITIES)
    assert process["noNewPrivileges"] is True
    # The same rlimits as the user's: root of a user namespace cannot raise a hard limit.
    assert process["rlimits"] == oci_process(SANDBOX, USER, ["id"], cwd="/")["rlimits"]


def test_the_users_commands_get_none() -> None:
    process = oci_process(SANDBOX, USER, ["id"], cwd="/")
    assert process["user"]["uid"] == USER
    assert all(granted == [] for granted in process["capabilities"].values())
