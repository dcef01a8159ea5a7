"""``airlock images save`` / ``load``: what one machine built, carried as one file to a Docker
daemon that has none of it, checked whole before that daemon sees a byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import docker
import pytest
from dockerd import spare_daemon

from engine import Settings, SyncEngine

pytestmark = pytest.mark.docker


def airlock(*args: str, docker_host: str | None = None) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "DOCKER_HOST"}
    if docker_host:
        environment["DOCKER_HOST"] = docker_host
    return subprocess.run(
        [sys.executable, "-m", "engine", *args], capture_output=True, text=True, timeout=600, env=environment
    )


def said(completed: subprocess.CompletedProcess[str]) -> str:
    """What the command wrote to stderr, unwrapped from the terminal's width."""
    return " ".join(completed.stderr.split())


def _airlock_tags(docker_host: str) -> list[str]:
    client = docker.DockerClient(base_url=docker_host, version="auto")
    try:
        return sorted(tag for image in client.images.list() for tag in image.tags if tag.startswith("airlock/"))
    finally:
        client.close()


def _damaged_copy(archive: Path, copy: Path) -> str:
    """``archive`` with one byte of its largest layer changed; that layer's name."""
    copy.write_bytes(archive.read_bytes())
    with tarfile.open(archive) as members:
        layer = max((m for m in members if m.isfile() and m.name.endswith("layer.tar")), key=lambda m: m.size)
    with copy.open("r+b") as data:
        data.seek(layer.offset_data + layer.size // 2)
        byte = data.read(1)
        data.seek(-1, 1)
        data.write(bytes([byte[0] ^ 0xFF]))
    return layer.name


def test_saved_images_load_into_a_daemon_that_has_none(language_images: None, tmp_path: Path) -> None:
    archive = tmp_path / "images.tar"
    saved = airlock("images", "save", str(archive), "javascript")
    assert saved.returncode == 0, saved.stderr
    assert "base, core, javascript" in saved.stdout
    with tarfile.open(archive) as members:
        names = members.getnames()
        manifest = json.loads(members.extractfile("airlock-images.json").read())  # type: ignore[union-attr]
    assert "manifest.json" in names and names[-1] == "airlock-images.json"  # Docker's archive, ours at its end
    assert [image["name"] for image in manifest["images"]] == ["base", "core", "javascript"]

    damaged = tmp_path / "damaged.tar"
    layer = _damaged_copy(archive, damaged)
    truncated = tmp_path / "truncated.tar"
    truncated.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with spare_daemon() as spare:
        assert _airlock_tags(spare) == []
        refused = airlock("images", "load", str(damaged), docker_host=spare)
        assert refused.returncode != 0 and "does not match" in said(refused) and layer in said(refused), refused
        cut = airlock("images", "load", str(truncated), docker_host=spare)
        assert cut.returncode != 0 and "not a whole image archive" in said(cut), cut
        assert "Traceback" not in refused.stderr + cut.stderr
        assert _airlock_tags(spare) == []  # checked before the daemon saw a byte

        loaded = airlock("images", "load", str(archive), docker_host=spare)
        assert loaded.returncode == 0, loaded.stderr
        assert _airlock_tags(spare) == sorted(image["tag"] for image in manifest["images"])
        with SyncEngine(Settings(docker_host=spare, runtime="docker", isolation="runc", pool_size=0)) as engine:
            ran = engine.run("console.log([1, 2, 3].map((x) => x * 2).join(' '))", language="javascript")
        assert ran.stdout == "2 4 6\n", ran


def test_save_names_what_it_cannot_save(tmp_path: Path) -> None:
    unknown = airlock("images", "save", str(tmp_path / "x.tar"), "cobol")
    assert unknown.returncode != 0 and "no image is called cobol" in said(unknown), unknown
    nowhere = airlock("images", "save", str(tmp_path / "missing" / "x.tar"))
    assert nowhere.returncode != 0 and "does not exist" in said(nowhere), nowhere
    not_ours = tmp_path / "plain.tar"
    with tarfile.open(not_ours, "w") as plain:
        plain.add(__file__, arcname="manifest.json")
    refused = airlock("images", "load", str(not_ours))
    assert refused.returncode != 0 and "airlock-images.json" in said(refused), refused
    assert not (tmp_path / "x.tar").exists()
