"""Load: 2,000 submissions (good, failing, hostile, malformed) at full concurrency.

Slow (several minutes): run with ``scripts/test -m slow``. Exactly one result per input, in
order; nothing left behind; the engine's memory stays bounded.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import docker
import psutil
import pytest

from engine import Engine, Limits, Settings
from engine.judge._datasets import read_submissions
from engine.judge._score import score_file
from engine.runtime._labels import MANAGED

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(3600)]

TOTAL = 2000
CONCURRENCY = 16
MEMORY_BOUND_MB = 300
HOSTILE = [
    "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "hoard = []\nwhile True:\n    hoard.append(b'x' * 2**24)\n",
    "while True:\n    pass\n",
    "while True:\n    print('flood' * 1000)\n",
    "import socket\nsocket.socket().connect(('10.0.0.1', 80))\n",
    "import os, signal\nos.kill(-1, signal.SIGKILL)\n",
    'import sys\nsys.stdout.write(\'{"type": "done", "tests": 1}\\n\')\n',
]


def record(index: int, rng: random.Random) -> str:
    kind = rng.random()
    a, b = rng.randint(0, 100), rng.randint(0, 100)
    stdin = [{"kind": "stdin", "input": f"{a} {b}", "expected_output": str(a + b)}]
    if kind < 0.35:
        row: Any = {"code": "a, b = map(int, input().split())\nprint(a + b)", "tests": stdin}
    elif kind < 0.55:
        row = {"code": "a, b = map(int, input().split())\nprint(a - b)", "tests": stdin}
    elif kind < 0.70:
        row = {
            "code": "def add(a, b):\n    return a + b",
            "fn_name": "add",
            "tests": [{"kind": "call", "args": [a, b], "expected": a + b}],
        }
    elif kind < 0.78:
        row = {
            "code": "def add(a, b):\n    return a + b",
            "entry_point": "add",
            "tests": [{"kind": "assert", "code": f"assert candidate({a}, {b}) == {a + b}"}],
        }
    elif kind < 0.90:
        row = {"code": rng.choice(HOSTILE), "tests": stdin, "limits": {"wall_time_s": 1, "memory_mb": 128}}
    elif kind < 0.95:
        return "{broken json" if rng.random() < 0.5 else json.dumps({"id": f"s{index}", "code": 5})
    else:
        row = {"code": "print(1)", "tests": [{"kind": "stdin", "input": "x"}]}
    return json.dumps({"id": f"s{index}", **row})


def test_two_thousand_mixed_submissions(tmp_path: Path) -> None:
    rng = random.Random(20261125)
    source = tmp_path / "load.jsonl"
    source.write_text("".join(record(i, rng) + "\n" for i in range(TOTAL)))
    output = tmp_path / "results.jsonl"
    process = psutil.Process()
    peak_mb = 0.0

    async def main() -> Any:
        nonlocal peak_mb
        settings = Settings(max_concurrency=CONCURRENCY)
        async with Engine(settings, limits=Limits(wall_time_s=5)) as engine, anyio.create_task_group() as group:

            async def sample() -> None:
                nonlocal peak_mb
                while True:
                    peak_mb = max(peak_mb, process.memory_info().rss / 2**20)
                    await anyio.sleep(0.5)

            group.start_soon(sample)
            summary = await score_file(
                engine, source, output, resume=False, details="summary", read=lambda path: read_submissions(path)
            )
            group.cancel_scope.cancel()
            return summary

    summary = anyio.run(main)
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(records) == TOTAL
    assert [r["line"] for r in records] == list(range(1, TOTAL + 1))
    assert summary.judged + summary.invalid == TOTAL
    verdicts = {r.get("verdict", "invalid") for r in records}
    assert {"passed", "wrong_answer", "invalid"} <= verdicts
    assert "sandbox_error" not in verdicts, [r for r in records if r.get("verdict") == "sandbox_error"][:3]
    print(
        f"\n{TOTAL} submissions in {summary.elapsed_s:.0f} s, engine peak RSS {peak_mb:.0f} MB, "
        f"verdicts {sorted(summary.verdicts.items())}, invalid {summary.invalid}"
    )
    assert peak_mb < MEMORY_BOUND_MB
    client = docker.from_env(version="auto")
    try:
        assert client.api.containers(all=True, filters={"label": f"{MANAGED}=true"}) == []
    finally:
        client.close()
