"""E2B's volumes through the unmodified SDK (`e2b.Volume`, `Sandbox.create(volume_mounts=...)`)
against `airlock serve` on every sandbox kind that mounts them: a volume's files outlive its
sandboxes, are every sandbox's user's own, and are read and written from outside any sandbox."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from integration.serving import API_KEY, Server
from sandboxes import SESSION_SANDBOXES, Sandbox, ids

e2b = pytest.importorskip("e2b")

pytestmark = pytest.mark.docker

# Docker's runc tier and the OCI runtime; gVisor refuses volumes (test below).
MOUNTING = [kind for kind in SESSION_SANDBOXES if kind.isolation != "gvisor"]
GVISOR = [kind for kind in SESSION_SANDBOXES if kind.isolation == "gvisor"]
OTHER_KEY = "e2b_" + "d4" * 20


@pytest.fixture(params=MOUNTING, ids=ids(MOUNTING))
def server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    kind: Sandbox = request.param
    monkeypatch.setenv("AIRLOCK_VOLUME_SIZE_MB", "32")
    with Server(kind.require().isolation, *kind.cli_flags()) as running:
        for name in ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_VOLUME_API_URL"):
            monkeypatch.setenv(name, running.url)
        monkeypatch.setenv("E2B_API_KEY", API_KEY)
        monkeypatch.delenv("E2B_DEBUG", raising=False)
        monkeypatch.delenv("E2B_DOMAIN", raising=False)
        yield running


def run(sandbox: Any, command: str, **options: Any) -> str:
    result = sandbox.commands.run(command, **options)
    assert result.exit_code == 0, (command, result.stderr)
    return str(result.stdout)


def test_a_volume_outlives_its_sandboxes_and_is_each_ones_own(server: Server) -> None:
    volume = e2b.Volume.create("results")
    volume.write_file("/in/question.txt", "6 * 7")
    assert volume.make_dir("/out").type.value == "directory"
    assert volume.get_info("/in/question.txt").uid == 1000
    assert [e.name for e in volume.list("/")] == ["in", "out"]
    assert e2b.Volume.connect(volume.volume_id).read_file("/in/question.txt") == "6 * 7"

    first = e2b.Sandbox.create(timeout=120, volume_mounts={"/mnt/work": volume})
    second = None
    try:
        assert run(first, "cat /mnt/work/in/question.txt") == "6 * 7"
        # A file from outside and one the sandbox made are the sandbox's user's, as in E2B.
        run(first, "echo 42 > /mnt/work/out/answer.txt")
        assert run(first, "stat -c %U /mnt/work/in/question.txt /mnt/work/out/answer.txt") == "user\nuser\n"
        # Its second sandbox (by the volume's name) has another host uid, and the same files as its own.
        second = e2b.Sandbox.create(timeout=120, volume_mounts={"/data": "results"})
        assert run(second, "cat /data/out/answer.txt && echo more >> /data/out/answer.txt") == "42\n"
        assert run(first, "cat /mnt/work/out/answer.txt") == "42\nmore\n"
        assert volume.read_file("/out/answer.txt") == "42\nmore\n"
        # Programs run from it, as from the sandbox's own places.
        volume.write_file("/tool.sh", "#!/bin/sh\necho tool ran\n", mode=0o755)
        assert run(second, "/data/tool.sh") == "tool ran\n"
        # A volume in use is not deleted.
        with pytest.raises(e2b.VolumeException):
            e2b.Volume.destroy(volume.volume_id)
        # It fills to its size, and no further; the sandbox goes on.
        with pytest.raises(e2b.CommandExitException, match="No space left on device"):
            first.commands.run("head -c 40M /dev/zero > /mnt/work/big", timeout=60)
        run(first, "rm /mnt/work/big")
    finally:
        first.kill()
        if second is not None:
            second.kill()
    # Its files outlive both sandboxes; a new one sees them.
    third = e2b.Sandbox.create(timeout=120, volume_mounts={"/mnt/again": "results"})
    try:
        assert run(third, "cat /mnt/again/out/answer.txt") == "42\nmore\n"
    finally:
        third.kill()
    volume.remove("/out")
    assert not volume.exists("/out/answer.txt")
    assert e2b.Volume.destroy(volume.volume_id) is True
    assert volume.volume_id not in [v.volume_id for v in e2b.Volume.list()]
    assert e2b.Volume.destroy(volume.volume_id) is False


def test_a_mount_path_in_the_system_or_the_sandboxs_own_places_is_refused(server: Server) -> None:
    volume = e2b.Volume.create("placed")
    try:
        for path in ("/etc", "/usr/local/lib", "/home/user/data", "/tmp/x", "relative", "/"):
            with pytest.raises(e2b.SandboxException, match=r"400: .*mounts at"):
                e2b.Sandbox.create(timeout=60, volume_mounts={path: volume})
        with pytest.raises(e2b.SandboxException, match=r"404: no volume 'nowhere'"):
            e2b.Sandbox.create(timeout=60, volume_mounts={"/mnt/x": "nowhere"})
    finally:
        e2b.Volume.destroy(volume.volume_id)


@pytest.mark.parametrize("kind", GVISOR, ids=ids(GVISOR))
def test_gvisor_refuses_volumes_naming_why(kind: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    with Server(kind.require().isolation, *kind.cli_flags()) as running:
        options = {"api_key": API_KEY, "api_url": running.url, "sandbox_url": running.url}
        volume = e2b.Volume.create("refused", **options)
        with pytest.raises(e2b.SandboxException, match="not offered on the gVisor tier"):
            e2b.Sandbox.create(timeout=60, volume_mounts={"/mnt/x": volume}, **options)
        assert e2b.Volume.destroy(volume.volume_id, **options) is True


@pytest.mark.parametrize("kind", MOUNTING, ids=ids(MOUNTING))
def test_volumes_and_a_sandbox_paused_with_one_outlive_the_server(kind: Sandbox, tmp_path: Path) -> None:
    """The volume and its files are on disk, in the paused directory: a restarted server has them
    (its owner's key only), and a sandbox paused to disk mounts its volume again when it resumes."""
    flags = [*kind.require().cli_flags(), "--api-key", OTHER_KEY, "--paused-dir", str(tmp_path)]
    with Server(kind.isolation, *flags) as first:
        mine = {"api_key": API_KEY, "api_url": first.url}
        volume = e2b.Volume.create("kept", **mine)
        paused = e2b.Sandbox.create(timeout=120, volume_mounts={"/mnt/kept": volume}, sandbox_url=first.url, **mine)
        run(paused, "echo before > /mnt/kept/note.txt")
        assert paused.pause(mode="filesystem") is True
        # Paused to disk, it still holds the volume.
        with pytest.raises(e2b.VolumeException):
            e2b.Volume.destroy(volume.volume_id, **mine)
    with Server(kind.isolation, *flags) as second:
        mine = {"api_key": API_KEY, "api_url": second.url}
        theirs = {"api_key": OTHER_KEY, "api_url": second.url}
        assert [v.name for v in e2b.Volume.list(**mine)] == ["kept"]
        assert e2b.Volume.list(**theirs) == []
        again = e2b.Volume.connect(volume.volume_id, **mine)
        assert again.read_file("/note.txt", api_url=second.url) == "before\n"
        resumed = e2b.Sandbox.connect(paused.sandbox_id, sandbox_url=second.url, **mine)
        assert run(resumed, "cat /mnt/kept/note.txt && echo after >> /mnt/kept/note.txt") == "before\n"
        resumed.kill()
        assert again.read_file("/note.txt", api_url=second.url) == "before\nafter\n"
        assert e2b.Volume.destroy(volume.volume_id, **mine) is True
    assert list(tmp_path.iterdir()) == [tmp_path / "volumes"] and list((tmp_path / "volumes").iterdir()) == []
