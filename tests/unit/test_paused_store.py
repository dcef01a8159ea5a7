"""The directory of sandboxes paused to disk, read by an engine that starts: what a pause stopped
midway left goes, a record it cannot read stays for the operator, the rest is taken up."""

from __future__ import annotations

import datetime
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import EngineError, Limits, SandboxError
from engine.sandboxes._paused import ArchiveStore, PausedRecord, SnapshotRecord, hold_directory, let_go_of_directory

NOW = datetime.datetime(2026, 11, 28, tzinfo=datetime.UTC)


def record(sandbox_id: str) -> PausedRecord:
    return PausedRecord(
        id=sandbox_id,
        language="python",
        template=None,
        limits=Limits(),
        env={"A": "1"},
        metadata={"airlock.template": "base"},
        started_at=NOW,
        end_at=NOW + datetime.timedelta(minutes=5),
    )


def test_a_store_keeps_whole_pauses_and_drops_what_one_stopped_midway_left(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = ArchiveStore(tmp_path / "paused", PausedRecord)
    assert store.records() == []  # no directory yet
    kept, midway, unreadable = "a" * 20, "b" * 20, "c" * 20
    for sandbox_id in (kept, midway, unreadable):
        descriptor = store.open_archive(sandbox_id)
        os.write(descriptor, b"archive")
        os.close(descriptor)
    store.save(record(kept))
    (store.directory / f"{unreadable}.json").write_text("{not json")
    (store.directory / f".{kept}.1234").write_text("half a record")

    with caplog.at_level(logging.WARNING, logger="airlock.engine"):
        assert store.records() == [record(kept)]
    assert sorted(p.name for p in store.directory.iterdir()) == sorted(
        [f"{kept}.json", f"{kept}.tar", f"{unreadable}.json", f"{unreadable}.tar"]
    )
    assert f"{unreadable}.json" in caplog.text
    assert oct(store.directory.stat().st_mode & 0o777) == "0o700"
    assert {oct(p.stat().st_mode & 0o777) for p in store.directory.glob(f"{kept}.*")} == {"0o600"}

    store.remove(kept)
    assert not store.archive(kept).exists() and store.records() == []


@pytest.mark.parametrize("name", ["../escape", "a" * 19, "A" * 20, "a" * 19 + "/"])
def test_a_name_that_is_no_sandbox_id_names_no_file(tmp_path: Path, name: str) -> None:
    with pytest.raises(SandboxError, match="not a sandbox id"):
        ArchiveStore(tmp_path, PausedRecord).archive(name)


def test_a_snapshot_store_keeps_snapshot_records(tmp_path: Path) -> None:
    store = ArchiveStore(tmp_path / "snapshots", SnapshotRecord)
    kept = SnapshotRecord(
        id="d" * 20,
        name="team/notes:v1",
        source="e" * 20,
        language="cpp",
        template=None,
        env={},
        metadata={"airlock.owner": "f" * 64},
        created_at=NOW,
    )
    os.close(store.open_archive(kept.id))
    store.save(kept)
    assert store.records() == [kept]
    # A paused sandbox's record is no snapshot's: left out, not taken for one.
    (store.directory / f"{'a' * 20}.json").write_text(record("a" * 20).model_dump_json())
    os.close(store.open_archive("a" * 20))
    assert store.records() == [kept]


HOLD = """import sys, time
from pathlib import Path
from engine.sandboxes._paused import hold_directory
hold_directory(Path(sys.argv[1]))
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold_apart(directory: Path, seconds: float = 0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HOLD, str(directory), str(seconds)], capture_output=True, text=True, timeout=60
    )


def test_one_process_at_a_time_holds_a_directory(tmp_path: Path) -> None:
    """Two processes on one directory would each take up, resume and expire the other's
    sandboxes, and one starting would delete the archive a pause of the other is writing."""
    hold_directory(tmp_path)
    hold_directory(tmp_path)  # a second engine of this process
    refused = _hold_apart(tmp_path)
    assert refused.returncode != 0 and f"another engine process (pid {os.getpid()})" in refused.stderr, refused
    let_go_of_directory(tmp_path)
    assert _hold_apart(tmp_path).returncode != 0  # one engine of this process still uses it
    let_go_of_directory(tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert _hold_apart(tmp_path).stdout == "held\n"


def test_a_killed_holder_lets_go_of_its_directory(tmp_path: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path), "60"], stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(EngineError, match=f"pid {holder.pid}"):
            hold_directory(tmp_path)
        holder.kill()
    hold_directory(tmp_path)  # the lock went with it
    let_go_of_directory(tmp_path)
