"""Our seccomp profile, loaded once and handed to the container engine as JSON content."""

from __future__ import annotations

import functools
import json
from typing import Any

from ._resources import resource_path

__all__ = ["profile", "profile_json"]

PROFILE_FILE = "airlock.json"


@functools.cache
def profile() -> dict[str, Any]:
    """The profile as data, checked for the properties the rest of the engine relies on."""
    data: dict[str, Any] = json.loads(resource_path("seccomp", PROFILE_FILE).read_text())
    if data.get("defaultAction") != "SCMP_ACT_ERRNO" or not data.get("syscalls"):
        raise ValueError(f"seccomp/{PROFILE_FILE} must deny by default and list allowed syscalls")
    return data


@functools.cache
def profile_json() -> str:
    """Compact JSON: the Docker API takes the profile's content, never a path."""
    return json.dumps(profile(), separators=(",", ":"))
