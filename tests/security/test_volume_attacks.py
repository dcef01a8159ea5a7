"""Attacks on volumes, by someone who has read engine/sandboxes/_volumes.py and
engine/runtime/_volumes.py, on every sandbox kind that mounts them.

A sandbox writes into a volume what the host later reads from outside any sandbox (the volume
content API runs as root on the host): links out of the volume, a FIFO that would hang a reader,
a link where the next write lands. It also writes what another sandbox, of another host uid or
another runtime, later runs: a setuid program of its root's. None of it may reach past the volume.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from integration.serving import API_KEY, Server
from paused import fresh_paused_dir
from sandboxes import OCI, SESSION_SANDBOXES, Sandbox, ids

from engine import EngineError, SyncEngine, VolumeFull
from engine._sync import SyncSandbox

pytestmark = pytest.mark.docker

MOUNTING = [kind for kind in SESSION_SANDBOXES if kind.isolation != "gvisor"]
OTHER_KEY = "e2b_" + "c3" * 20
MOUNT = "/mnt/shared"


@pytest.fixture(scope="module", params=MOUNTING, ids=ids(MOUNTING))
def engine(request: pytest.FixtureRequest) -> Iterator[SyncEngine]:
    kind: Sandbox = request.param
    with SyncEngine(kind.require().settings(paused_dir=fresh_paused_dir(), volume_size_mb=32)) as opened:
        yield opened


@pytest.fixture
def planted(engine: SyncEngine) -> Iterator[tuple[str, SyncSandbox]]:
    """A volume, mounted in a sandbox whose most privileged user has planted what is below."""
    volume = engine.volumes.create("planted").id
    sandbox = engine.create_sandbox(timeout_s=120, volumes={MOUNT: volume})
    plant = (
        f"cd {MOUNT} && ln -s /etc/shadow shadow && ln -s ../../../../../etc up && ln -s /proc/1/root init"
        " && ln -s /root/planted-by-a-sandbox target && mkfifo pipe && mkdir real && echo inside > real/file"
    )
    assert sandbox.exec(["sh", "-c", plant], user=sandbox.users[-1]).exit_code == 0
    yield volume, sandbox
    engine.sandboxes.kill(sandbox.id)
    engine.volumes.delete(volume)


def test_links_a_sandbox_left_lead_nowhere_outside_the_volume(
    planted: tuple[str, SyncSandbox], engine: SyncEngine
) -> None:
    volume, _ = planted
    for path in ("/shadow", "/up/passwd", "/init/etc/hostname", "up/../../etc/passwd"):
        with pytest.raises((EngineError, ValueError)):
            engine.volumes.read(volume, path)
    with pytest.raises(EngineError):
        engine.volumes.list_dir(volume, "/up")
    with pytest.raises(EngineError):
        engine.volumes.write(volume, "/up/cron.d/planted", b"* * * * * root true\n")
    assert not Path("/etc/cron.d/planted").exists()
    # A write to a link replaces the link; it never writes where the link points.
    engine.volumes.write(volume, "/target", b"replaced")
    assert not Path("/root/planted-by-a-sandbox").exists()
    assert engine.volumes.stat(volume, "/target").type == "file"
    # A link is described, not followed; within the volume, one resolves as in its root.
    assert engine.volumes.stat(volume, "/shadow").target == "/etc/shadow"
    assert engine.volumes.read(volume, "/real/file") == b"inside\n"


def test_a_fifo_is_refused_not_waited_on(planted: tuple[str, SyncSandbox], engine: SyncEngine) -> None:
    volume, _ = planted
    with pytest.raises(ValueError, match="is not a file"):
        engine.volumes.read(volume, "/pipe")


def test_nothing_outside_the_volume_is_removed_or_changed(planted: tuple[str, SyncSandbox], engine: SyncEngine) -> None:
    volume, _ = planted
    before = os.stat("/etc/passwd")
    engine.volumes.remove(volume, "/up")  # the link goes, not what it names
    assert Path("/etc/passwd").exists() and os.stat("/etc/passwd").st_mode == before.st_mode
    with pytest.raises(EngineError):
        engine.volumes.remove(volume, "/up/passwd")
    for path in ("..", "/../..", "a/../../b"):
        with pytest.raises(ValueError, match="may not go up"):
            engine.volumes.stat(volume, path)


def test_a_setuid_program_of_a_sandboxs_root_gives_no_one_its_uid(tmp_path: Path) -> None:
    """The OCI runtime's root writes a setuid copy of ``id`` into a volume; another sandbox on the
    OCI runtime and one on Docker run it: every view is nosuid, and on Docker root's files are not
    even mapped (they show as nobody)."""
    paused_dir = fresh_paused_dir()
    with SyncEngine(OCI.require().settings(paused_dir=paused_dir, volume_size_mb=32)) as engine:
        volume = engine.volumes.create("setuid").id
        sandbox = engine.create_sandbox(timeout_s=120, volumes={MOUNT: volume})
        made = sandbox.exec(["sh", "-c", f"cp /usr/bin/id {MOUNT}/id && chmod 4755 {MOUNT}/id"], user="root")
        assert made.exit_code == 0, made
        assert engine.volumes.stat(volume, "/id").mode == 0o4755
        ran = sandbox.exec([f"{MOUNT}/id", "-u"])
        assert ran.stdout.strip() == sandbox.exec(["id", "-u"]).stdout.strip(), ran
        engine.sandboxes.kill(sandbox.id)
    docker = next(kind for kind in MOUNTING if kind.runtime == "docker")
    with SyncEngine(docker.require().settings(paused_dir=paused_dir, volume_size_mb=32)) as engine:
        sandbox = engine.create_sandbox(timeout_s=120, volumes={MOUNT: volume})
        try:
            shown = sandbox.exec(["stat", "-c", "%U %a", f"{MOUNT}/id"]).stdout.strip()
            assert shown == "nobody 4755", shown
            ran = sandbox.exec([f"{MOUNT}/id", "-u"])
            assert ran.exit_code == 0 and ran.stdout.strip() == sandbox.exec(["id", "-u"]).stdout.strip(), ran
        finally:
            engine.sandboxes.kill(sandbox.id)
        engine.volumes.delete(volume)


def test_the_content_api_refuses_setuid_bits_and_strange_owners(engine: SyncEngine) -> None:
    volume = engine.volumes.create("modes").id
    try:
        with pytest.raises(ValueError, match="no setuid"):
            engine.volumes.write(volume, "/x", b"", mode=0o4755)
    finally:
        engine.volumes.delete(volume)


def test_a_write_past_the_volumes_size_leaves_nothing_behind(engine: SyncEngine) -> None:
    """Written whole or not at all: a write that fills the volume is undone, and the volume, its
    size what it was, takes the next one."""
    volume = engine.volumes.create("filled").id
    try:
        with pytest.raises(VolumeFull):
            engine.volumes.write(volume, "/big", b"\0" * (40 << 20))
        assert engine.volumes.list_dir(volume, "/") == []
        engine.volumes.write(volume, "/small", b"fits")
        assert engine.volumes.read(volume, "/small") == b"fits"
    finally:
        engine.volumes.delete(volume)


@pytest.fixture(scope="module")
def two_keys() -> Iterator[Server]:
    with Server("runc", "--api-key", OTHER_KEY, api_key=API_KEY) as running:
        yield running


def test_a_key_reaches_no_other_keys_volume(two_keys: Server) -> None:
    url = two_keys.url
    mine, theirs = {"X-API-KEY": API_KEY}, {"X-API-KEY": OTHER_KEY}
    made = httpx.post(f"{url}/volumes", json={"name": "private"}, headers=mine, timeout=30)
    assert made.status_code == 201, made.text
    volume, token = made.json()["volumeID"], made.json()["token"]
    try:
        assert httpx.get(f"{url}/volumes", headers=theirs, timeout=30).json() == []
        for by in ("private", volume):
            assert httpx.get(f"{url}/volumes/{by}", headers=theirs, timeout=30).status_code == 404
            assert httpx.delete(f"{url}/volumes/{by}", headers=theirs, timeout=30).status_code == 404
        # Their sandbox cannot mount it, by name or by id.
        for by in ("private", volume):
            body = {"templateID": "base", "volumeMounts": [{"name": by, "path": "/mnt/x"}]}
            assert httpx.post(f"{url}/sandboxes", json=body, headers=theirs, timeout=60).status_code == 404
        # Its files answer only its token; a wrong one and a volume that is not there look alike.
        content = f"{url}/volumecontent/{volume}/file?path=/a"
        assert (
            httpx.put(content, content=b"x", headers={"Authorization": f"Bearer {token}"}, timeout=30).status_code
            == 201
        )
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": OTHER_KEY}, theirs):
            assert httpx.get(content, headers=headers, timeout=30).status_code == 401
        assert (
            httpx.get(
                f"{url}/volumecontent/{'0' * 20}/file?path=/a", headers={"Authorization": "Bearer wrong"}, timeout=30
            ).status_code
            == 401
        )
        # The same name is theirs to use, for a volume of their own.
        assert httpx.post(f"{url}/volumes", json={"name": "private"}, headers=theirs, timeout=30).status_code == 201
    finally:
        httpx.delete(f"{url}/volumes/{volume}", headers=mine, timeout=30)
        for kept in httpx.get(f"{url}/volumes", headers=theirs, timeout=30).json():
            httpx.delete(f"{url}/volumes/{kept['volumeID']}", headers=theirs, timeout=30)
