"""Sandboxes paused to disk (E2B's filesystem mode) and snapshots: what a sandbox was made from, in
a record, and its files, in an archive its own ``tar`` wrote, both in one private directory, so
that a paused sandbox costs no memory or CPU and both outlive the engine that wrote them."""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import logging
import os
import secrets
import threading
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from .._errors import EngineError, SandboxError
from .._limits import Limits
from .._models import Language

__all__ = ["ArchiveStore", "PausedRecord", "SnapshotRecord", "hold_directory", "let_go_of_directory"]

log = logging.getLogger("airlock.engine")

# A sandbox id as Sandbox makes them (a snapshot's is made alike): the only names a store holds.
ID_CHARS = frozenset("0123456789abcdef")
# Directories this process holds: each one's locked descriptor and how many engines use it.
_held: dict[Path, tuple[int, int]] = {}
_held_guard = threading.Lock()


def hold_directory(directory: Path) -> None:
    """Hold ``directory`` for this process's engines (one more of them), or raise ``EngineError``
    when another process holds it. Two processes on one directory would each take up, resume and
    expire the other's sandboxes, and one starting would delete the archive a pause of the other
    is writing (see :meth:`ArchiveStore.records`). Engines in one process share it: they share
    its sandboxes' fate anyway. The lock is on the directory itself, which the kernel lets go of
    when the process ends, however it ends."""
    key = directory.resolve()
    with _held_guard:
        if key in _held:
            fd, engines = _held[key]
            _held[key] = (fd, engines + 1)
            return
        key.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(key, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder_of(os.fstat(fd))
            os.close(fd)
            raise EngineError(
                f"{key} holds the sandboxes paused to disk of another engine process (pid {holder}): one process"
                " per directory; give this one a paused_dir of its own (AIRLOCK_PAUSED_DIR, --paused-dir)"
            ) from None
        _held[key] = (fd, 1)


def let_go_of_directory(directory: Path) -> None:
    """One engine of this process less on ``directory``; the last one lets another process have it."""
    key = directory.resolve()
    with _held_guard:
        fd, engines = _held.pop(key)
        if engines > 1:
            _held[key] = (fd, engines - 1)
        else:
            os.close(fd)


def _holder_of(locked: os.stat_result) -> str:
    """The pid the kernel names as holding a lock on ``locked`` (``/proc/locks``), or "unknown"."""
    # Each line: "N: FLOCK ADVISORY WRITE PID MAJOR:MINOR:INODE START END", the device in hex.
    device = f"{os.major(locked.st_dev):02x}:{os.minor(locked.st_dev):02x}:{locked.st_ino}"
    with contextlib.suppress(OSError):
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == device:
                return fields[4]
    return "unknown"


class PausedRecord(BaseModel):
    """What a sandbox paused to disk is made again from when it resumes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=20, max_length=20)
    language: Language
    template: str | None = Field(description="the operator's template it runs, if any")
    limits: Limits
    env: dict[str, str]
    metadata: dict[str, str]
    started_at: datetime.datetime
    end_at: datetime.datetime = Field(description="when it expires, unless its timeout is set again")
    volumes: dict[str, str] = Field(default_factory=dict, description="path -> the volume mounted there")


class SnapshotRecord(BaseModel):
    """What a snapshot's sandboxes are made from: its source's image and settings; with its archive,
    the files the source had when it was taken."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=20, max_length=20)
    name: str | None = Field(description="the name it was given, which also finds it")
    source: str = Field(description="the sandbox it was taken of")
    language: Language
    template: str | None = Field(description="the operator's template its source runs, if any")
    env: dict[str, str]
    metadata: dict[str, str]
    created_at: datetime.datetime


Record = TypeVar("Record", PausedRecord, SnapshotRecord)


class ArchiveStore(Generic[Record]):
    """One directory (mode 0700): ``ID.json`` and ``ID.tar`` per paused sandbox or per snapshot. A
    record is written after its archive and removed before it, so a record always has its files."""

    def __init__(self, directory: Path, kind: type[Record]) -> None:
        self.directory = directory
        self._kind: type[Record] = kind

    def archive(self, sandbox_id: str) -> Path:
        return self.directory / f"{_checked(sandbox_id)}.tar"

    def _record(self, sandbox_id: str) -> Path:
        return self.directory / f"{_checked(sandbox_id)}.json"

    def open_archive(self, sandbox_id: str) -> int:
        """A new archive's descriptor, for writing, readable by nobody else."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        return os.open(self.archive(sandbox_id), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)

    def save(self, record: Record) -> None:
        # Written whole, then renamed: an engine stopped midway leaves no half record behind.
        partial = self.directory / f".{record.id}.{secrets.token_hex(4)}"
        partial.write_text(record.model_dump_json())
        partial.chmod(0o600)
        partial.replace(self._record(record.id))

    def records(self) -> list[Record]:
        """Every record. One that cannot be read is left where it is, with its
        archive, for the operator to look at, and said so in the log: it must not stop the rest."""
        if not self.directory.is_dir():
            return []
        # What a pause stopped midway left (the engine died): a record is written last.
        for partial in self.directory.glob(".*"):
            partial.unlink(missing_ok=True)
        for archive in self.directory.glob("*.tar"):
            if not archive.with_suffix(".json").exists():
                archive.unlink(missing_ok=True)
        found = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                record = self._kind.model_validate_json(path.read_bytes())
                if path.name != f"{record.id}.json" or not self.archive(record.id).is_file():
                    raise ValueError("it names no archive beside it")
            except (OSError, ValueError, SandboxError) as exc:
                log.warning("the record %s is left out: %s", path, exc)
                continue
            found.append(record)
        return found

    def remove(self, sandbox_id: str) -> None:
        self._record(sandbox_id).unlink(missing_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.archive(sandbox_id).unlink()


def _checked(sandbox_id: str) -> str:
    if len(sandbox_id) != 20 or not set(sandbox_id) <= ID_CHARS:
        raise SandboxError(f"{sandbox_id!r} is not a sandbox id (nor a snapshot's)")
    return sandbox_id
