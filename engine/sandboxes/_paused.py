"""Sandboxes paused to disk (E2B's filesystem mode) and snapshots: what a sandbox was made from, in
a record, and its files, in an archive its own ``tar`` wrote, both in one private directory, so
that a paused sandbox costs no memory or CPU and both outlive the engine that wrote them."""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import secrets
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from .._errors import SandboxError
from .._limits import Limits
from .._models import Language

__all__ = ["ArchiveStore", "PausedRecord", "SnapshotRecord"]

log = logging.getLogger("airlock.engine")

# A sandbox id as Sandbox makes them (a snapshot's is made alike): the only names a store holds.
ID_CHARS = frozenset("0123456789abcdef")


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
