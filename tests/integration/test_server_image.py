"""The deployment recipe (docs/deployment.md) as a user follows it: `scripts/server-image` builds
the server's image with no registry, a container of it serves on loopback through the node's
Docker socket, and `docker stop` drains it and leaves none of its sandboxes behind."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import docker
import httpx
import pytest
from integration.serving import API_KEY, free_port

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]


def test_the_server_image_serves_and_stops_cleanly() -> None:
    built = subprocess.run(
        [str(ROOT / "scripts" / "server-image")], capture_output=True, text=True, timeout=900, check=False
    )
    assert built.returncode == 0, built.stderr[-3000:]
    tag = built.stdout.strip().splitlines()[-1]
    client = docker.from_env(version="auto")
    port = free_port()
    hostname = f"airlock-test-{uuid.uuid4().hex[:8]}"

    def its_containers() -> list[str]:
        # One listing call: inspecting each listed container would race with the server removing it.
        listed = client.api.containers(all=True, filters={"label": "io.airlock.owner"})
        return [str(c["Id"]) for c in listed if c["Labels"]["io.airlock.owner"].startswith(f"{hostname}:")]

    # Made, then started inside the try: a start that fails must not leave the container behind.
    container = client.containers.create(
        tag,
        ["serve", "--host", "0.0.0.0", "--api-key", API_KEY],
        hostname=hostname,
        volumes={"/var/run/docker.sock": {"bind": "/var/run/docker.sock"}, "/run/airlock": {"bind": "/run/airlock"}},
        ports={"49982/tcp": ("127.0.0.1", port)},
    )
    try:
        container.start()
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, container.logs().decode()[-3000:]
            time.sleep(0.5)
        headers = {"X-API-KEY": API_KEY}
        ran = httpx.post(
            f"{url}/run_code",
            json={"code": "print(input() * 2)", "stdin": "ab", "language": "python"},
            headers=headers,
            timeout=60,
        )
        assert ran.json()["run_result"]["stdout"] == "abab\n"
        assert httpx.post(f"{url}/run_code", json={}, timeout=10).status_code == 401

        started = its_containers()
        assert started, "the server keeps warm containers on the node's daemon"
        container.stop(timeout=40)
        assert container.wait(timeout=60)["StatusCode"] == 0
        assert not its_containers()
        assert "Traceback" not in container.logs().decode()
    finally:
        container.remove(force=True)
        # A server killed before its drain cannot remove its own containers.
        for leftover in its_containers():
            client.api.remove_container(leftover, force=True)
        client.close()
