"""Where the suite's engines and servers keep sandboxes paused to disk, and snapshots: folders of
one directory of this run's (checked empty at its end), never the user's. An engine's process
holds the folder it uses, so every server and every engine that pauses gets one of its own."""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path


@functools.cache
def run_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="airlock-paused-"))


def fresh_paused_dir() -> Path:
    return Path(tempfile.mkdtemp(dir=run_dir()))


def kept_files() -> list[str]:
    """What is left in the run's folders."""
    if run_dir.cache_info().currsize == 0:
        return []
    return sorted(str(entry.relative_to(run_dir())) for entry in run_dir().rglob("*") if not entry.is_dir())


def remove_run_dir() -> None:
    if run_dir.cache_info().currsize:
        shutil.rmtree(run_dir())
