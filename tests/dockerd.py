"""What the machine's Docker daemon offers, for tests that skip what it lacks."""

from __future__ import annotations

import docker


def registered_runtimes() -> set[str]:
    """The OCI runtimes registered with dockerd, by name (runc always; crun, runsc where set up)."""
    client = docker.from_env(version="auto")
    try:
        return set(client.info().get("Runtimes") or {})
    finally:
        client.close()
