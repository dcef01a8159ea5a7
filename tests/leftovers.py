"""What of ours a test or the suite can find left on this machine."""

from __future__ import annotations

import gc
import warnings

import docker

from engine.runtime._labels import MANAGED


def our_containers() -> list[str]:
    """Every container our label marks, whoever made it."""
    try:
        client = docker.from_env(version="auto")
    except docker.errors.DockerException as error:
        failure = str(error)
    else:
        failure = ""
    if failure:
        # docker-py leaves the refused connection's socket open, held by the error's frames: close
        # it here, or pytest reports it as an error of whichever test the collector happens to run in.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
        raise docker.errors.DockerException(failure)
    try:
        # The low-level list: one call, no per-container inspection that races with removals.
        return [c["Id"] for c in client.api.containers(all=True, filters={"label": f"{MANAGED}=true"})]
    finally:
        client.close()
