"""Our seccomp profile, loaded once and handed to the container engine as JSON content."""

from __future__ import annotations

import copy
import functools
import json
import platform
from typing import Any

from .._settings import Isolation
from ._resources import resource_path

__all__ = ["oci_profile", "profile", "profile_json"]

PROFILE_FILE = "airlock.json"
ENOSYS = 38
EAFNOSUPPORT = 97
# AF_UNIX, AF_INET, AF_INET6: a long-lived sandbox's socket families (see ``_with_loopback``).
LOOPBACK_FAMILIES = (1, 2, 10)
ALL_BITS = 2**64 - 1


@functools.cache
def profile() -> dict[str, Any]:
    """The profile as data, checked for the properties the rest of the engine relies on."""
    data: dict[str, Any] = json.loads(resource_path("seccomp", PROFILE_FILE).read_text())
    if data.get("defaultAction") != "SCMP_ACT_ERRNO" or not data.get("syscalls"):
        raise ValueError(f"seccomp/{PROFILE_FILE} must deny by default and list allowed syscalls")
    return data


@functools.cache
def profile_json(isolation: Isolation = "runc", loopback: bool = False) -> str:
    """Compact JSON: the Docker API takes the profile's content, never a path."""
    data = _with_loopback(profile()) if loopback else profile()
    return json.dumps(data if isolation == "runc" else _for_gvisor(data), separators=(",", ":"))


def _with_loopback(data: dict[str, Any]) -> dict[str, Any]:
    """The profile of a long-lived sandbox, whose programs may serve on its own loopback (its
    network namespace has nothing else): ``socket()`` makes ``AF_UNIX``, ``AF_INET`` and
    ``AF_INET6`` sockets, and every other family is refused as before.

    The families are split into rules that never overlap (every value matches exactly one), so
    which of two matching rules wins never arises.
    """
    data = copy.deepcopy(data)
    data["syscalls"] = [rule for rule in data["syscalls"] if rule["names"] != ["socket"]]

    def domain(op: str, value: int, value_two: int = 0) -> dict[str, Any]:
        return {"index": 0, "value": value, "valueTwo": value_two, "op": op}

    allowed = [domain("SCMP_CMP_EQ", family) for family in LOOPBACK_FAMILIES]
    refused = [
        domain("SCMP_CMP_EQ", 0),
        domain("SCMP_CMP_EQ", 3),
        domain("SCMP_CMP_MASKED_EQ", ALL_BITS & ~3, 4),  # 4 to 7
        domain("SCMP_CMP_MASKED_EQ", ALL_BITS & ~1, 8),  # 8 and 9
        domain("SCMP_CMP_GT", max(LOOPBACK_FAMILIES)),
    ]
    data["syscalls"] += [{"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [rule]} for rule in allowed]
    data["syscalls"] += [
        {"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": EAFNOSUPPORT, "args": [rule]} for rule in refused
    ]
    return data


def _for_gvisor(data: dict[str, Any]) -> dict[str, Any]:
    """The profile as gVisor's kernel must see it.

    Debian's runsc answers EPERM for every denied call, whatever errno a rule names. glibc only
    falls back from ``clone3`` to ``clone`` (and so only creates threads and spawns processes)
    on ENOSYS, so ``clone3`` is passed to gVisor's own kernel, which answers ENOSYS itself or
    implements it; either way the call never reaches the host kernel.
    """
    data = copy.deepcopy(data)
    for rule in data["syscalls"]:
        if rule.get("errnoRet") == ENOSYS and "clone3" in rule["names"]:
            rule["names"] = [name for name in rule["names"] if name != "clone3"]
    data["syscalls"].append({"names": ["clone3"], "action": "SCMP_ACT_ALLOW"})
    return data


# Architecture names as libseccomp and Docker's profile format spell them.
_ARCHES = {"x86_64": ("SCMP_ARCH_X86_64", "amd64"), "aarch64": ("SCMP_ARCH_AARCH64", "arm64")}


def oci_profile(loopback: bool = False) -> dict[str, Any]:
    """The same profile in the OCI runtime spec's form (``linux.seccomp``), for runc directly.

    Docker resolves its format's per-architecture and per-capability conditions when it hands
    the profile to runc; this does the same for the native architecture, so there is one
    source of truth.
    """
    scmp_arch, docker_arch = _ARCHES[platform.machine()]
    data = _with_loopback(profile()) if loopback else profile()
    rules = []
    for rule in data["syscalls"]:
        includes = rule.get("includes", {})
        if includes.get("caps") or rule.get("excludes"):
            raise ValueError("capability conditions have no place in our profile")
        if includes.get("arches") and docker_arch not in includes["arches"]:
            continue
        rules.append({key: rule[key] for key in ("names", "action", "args", "errnoRet") if key in rule})
    return {
        "defaultAction": data["defaultAction"],
        "defaultErrnoRet": data.get("defaultErrnoRet", 1),
        "architectures": [scmp_arch],
        "syscalls": rules,
    }
