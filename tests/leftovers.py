"""What of ours a test or the suite can find left on this machine."""

from __future__ import annotations

import docker

from engine._labels import MANAGED


def our_containers() -> list[str]:
    """Every container our label marks, whoever made it."""
    client = docker.from_env(version="auto")
    try:
        # The low-level list: one call, no per-container inspection that races with removals.
        return [c["Id"] for c in client.api.containers(all=True, filters={"label": f"{MANAGED}=true"})]
    finally:
        client.close()
