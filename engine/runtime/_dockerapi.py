"""The one place that speaks to the Docker daemon's API (docker-py): the client, the mapping
of its errors to ours, and the image operations every part needs (the Docker runtime, the OCI
runtime's unpacking, image building, the CLI). Blocking: callers run it in worker threads."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import docker
import docker.errors
import requests.exceptions

from .._errors import ImageNotFound, RuntimeUnavailable, SandboxError

__all__ = ["connect", "export_image", "image_config", "image_id", "map_docker_errors"]

START_HINT = (
    "no Docker engine answers. Run scripts/setup (it installs and starts Debian's docker.io "
    "when it can), or start dockerd yourself, or point DOCKER_HOST at a running engine"
)


@contextlib.contextmanager
def map_docker_errors(action: str) -> Iterator[None]:
    """Translate docker-py and transport exceptions into the engine's own, most specific first."""
    try:
        yield
    except docker.errors.ImageNotFound as exc:
        raise ImageNotFound(f"{action}: {exc.explanation or exc}. Run `airlock images build`.") from exc
    except docker.errors.NotFound as exc:
        raise SandboxError(f"{action}: {exc.explanation or exc}") from exc
    except docker.errors.APIError as exc:
        raise SandboxError(f"{action}: {exc.explanation or exc}") from exc
    except (requests.exceptions.ConnectionError, ConnectionError, FileNotFoundError) as exc:
        raise RuntimeUnavailable(f"{action}: {START_HINT} ({exc})") from exc
    except requests.exceptions.RequestException as exc:
        raise SandboxError(f"{action}: {exc}") from exc
    except docker.errors.DockerException as exc:
        raise RuntimeUnavailable(f"{action}: {exc}") from exc


def connect(base_url: str | None = None, *, max_pool_size: int = 10) -> docker.DockerClient:
    """A client of the daemon at ``base_url`` (``None``: ``DOCKER_HOST``, else the local socket)
    that has answered a ping; ``RuntimeUnavailable`` with the remedy when none answers."""
    with map_docker_errors("connecting to the Docker engine"):
        if base_url:
            client = docker.DockerClient(base_url=base_url, version="auto", max_pool_size=max_pool_size)
        else:
            client = docker.from_env(version="auto", max_pool_size=max_pool_size)
        # Proxies from the environment never apply to the daemon's socket, and looking them up
        # iterates os.environ in the calling thread on every call: that raises KeyError when
        # another thread changes the environment meanwhile (pytest does, between tests).
        client.api.trust_env = False
        client.ping()
    return client


def image_id(client: docker.DockerClient, tag: str) -> str | None:
    """The content id of a local image, or None when there is none."""
    with map_docker_errors("inspecting an image"):
        try:
            return str(client.api.inspect_image(tag)["Id"])
        except docker.errors.ImageNotFound:
            return None


def image_config(client: docker.DockerClient, tag: str) -> dict[str, Any]:
    """An image's run configuration (``Entrypoint``, ``Cmd``, ...)."""
    with map_docker_errors(f"inspecting {tag}"):
        config: dict[str, Any] = client.api.inspect_image(tag)["Config"]
        return config


def export_image(
    client: docker.DockerClient, tag: str, labels: Mapping[str, str], write: Callable[[bytes], Any]
) -> None:
    """Stream ``tag``'s root file system, as a tar archive, to ``write``."""
    with map_docker_errors(f"exporting {tag}"):
        created = client.api.create_container(tag, entrypoint=["true"], labels=dict(labels))
        try:
            for chunk in client.api.export(created["Id"]):
                write(chunk)
        finally:
            with contextlib.suppress(docker.errors.APIError):
                client.api.remove_container(created["Id"], force=True)
