"""What the machine's Docker daemon offers, for tests that skip what it lacks."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest


def registered_runtimes() -> set[str]:
    """The OCI runtimes registered with dockerd, by name (runc always; crun, runsc where set up)."""
    client = docker.from_env(version="auto")
    try:
        return set(client.info().get("Runtimes") or {})
    finally:
        client.close()


@contextlib.contextmanager
def spare_daemon() -> Iterator[str]:
    """A second Docker daemon of its own (no image, no runtime but runc, no network); its
    address. It and everything it holds end on exit."""
    if os.geteuid() != 0 or shutil.which("dockerd") is None or shutil.which("unshare") is None:
        pytest.skip("a second Docker daemon needs root, dockerd and unshare")
    # A short path: its containerd's sockets live under it, and a socket's path has 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="airlock-dockerd-", dir="/tmp"))
    (root / "config.json").write_text("{}")  # not the machine's daemon.json, whose sockets are taken
    address = root / "docker.sock"
    with (root / "dockerd.log").open("wb") as log:
        daemon = subprocess.Popen(
            [
                # A network namespace of its own: a daemon without a bridge deletes the host's
                # docker0 at start, which the machine's own daemon needs.
                "unshare",
                "--net",
                "dockerd",
                f"--config-file={root / 'config.json'}",
                f"--data-root={root / 'data'}",
                f"--exec-root={root / 'exec'}",
                f"--pidfile={root / 'dockerd.pid'}",
                f"--host=unix://{address}",
                "--bridge=none",
                "--iptables=false",
                "--ip6tables=false",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 60
        while not _answers_ping(address):
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((root / "dockerd.log").read_text()[-2000:])
            time.sleep(0.2)
        yield f"unix://{address}"
    finally:
        daemon.terminate()
        try:
            daemon.wait(60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        # Its own containerd and the layers' mounts go with it; then its files can.
        subprocess.run(["umount", "-R", str(root / "exec")], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


def _answers_ping(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as client:
        try:
            client.connect(str(path))
            client.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            return client.recv(4096).startswith(b"HTTP/1.0 200")
        except OSError:
            return False
