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


@functools.cache
def profile() -> dict[str, Any]:
    """The profile as data, checked for the properties the rest of the engine relies on."""
    data: dict[str, Any] = json.loads(resource_path("seccomp", PROFILE_FILE).read_text())
    if data.get("defaultAction") != "SCMP_ACT_ERRNO" or not data.get("syscalls"):
        raise ValueError(f"seccomp/{PROFILE_FILE} must deny by default and list allowed syscalls")
    return data


@functools.cache
def profile_json(isolation: Isolation = "runc") -> str:
    """Compact JSON: the Docker API takes the profile's content, never a path."""
    data = profile() if isolation == "runc" else _for_gvisor(profile())
    return json.dumps(data, separators=(",", ":"))


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


def oci_profile() -> dict[str, Any]:
    """The same profile in the OCI runtime spec's form (``linux.seccomp``), for runc directly.

    Docker resolves its format's per-architecture and per-capability conditions when it hands
    the profile to runc; this does the same for the native architecture, so there is one
    source of truth.
    """
    scmp_arch, docker_arch = _ARCHES[platform.machine()]
    data = profile()
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
