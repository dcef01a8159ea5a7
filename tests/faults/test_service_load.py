"""Load on `airlock serve`: 10,000 mixed requests from 64 concurrent clients across the dialects
(SandboxFusion, Piston, the batch API), good programs, failing ones, hostile ones and malformed
requests. Every request gets exactly one answer, and it is its own (each program prints a token
of its request); nothing is left running; the server's memory stays bounded.

Slow (several minutes): run with ``scripts/test -m slow``; it prints the latency percentiles.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from typing import Any

import anyio
import httpx
import psutil
import pytest
from integration.serving import Server

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(3600)]

TOTAL = 10_000
CLIENTS = 64
MEMORY_BOUND_MB = 400
HOSTILE = [
    "while True:\n    pass\n",
    "hoard = []\nwhile True:\n    hoard.append(b'x' * 2**24)\n",
    "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "while True:\n    print('flood' * 1000)\n",
]

Check = Any  # (response) -> None, raising AssertionError when the answer is not this request's


def request(index: int, rng: random.Random) -> tuple[str, str, Any, Check]:
    """The ``index``th request: dialect, path, body, and what its answer must be."""
    token = f"T{index}"
    kind = rng.random()
    if kind < 0.45:
        fails = rng.random() < 0.3
        code = f"print({token!r})" + ("\nraise SystemExit(3)" if fails else "")

        def run_code(answer: httpx.Response) -> None:
            body = answer.json()
            assert answer.status_code == 200 and body["run_result"]["stdout"] == f"{token}\n", body
            assert body["status"] == ("Failed" if fails else "Success") and body["run_result"]["return_code"] == (
                3 if fails else 0
            )

        return "sandbox_fusion", "/run_code", {"code": code, "language": "python"}, run_code
    if kind < 0.65:
        language, code = (
            ("c", f'#include <stdio.h>\nint main(void){{puts("{token}");}}')
            if index % 10 == 0
            else (
                "python",
                f"print({token!r})",
            )
        )

        def execute(answer: httpx.Response) -> None:
            assert answer.status_code == 200 and answer.json()["run"]["stdout"] == f"{token}\n", answer.text

        return "piston", "/api/v2/execute", {"language": language, "files": [{"content": code}]}, execute
    if kind < 0.80:
        submissions = [
            {
                "id": f"{token}-{part}",
                "code": "print(int(input()) * 2)",
                "tests": [{"kind": "stdin", "input": str(n), "expected_output": str(2 * n + part)}],
            }
            for part, n in enumerate((rng.randint(0, 99), rng.randint(0, 99)))
        ]

        def judge(answer: httpx.Response) -> None:
            assert answer.status_code == 200, answer.text
            lines = [line for line in answer.text.splitlines() if line]
            records = [json.loads(line) for line in lines]
            assert [r["id"] for r in records] == [f"{token}-0", f"{token}-1"]
            assert [r["verdict"] for r in records] == ["passed", "wrong_answer"]

        return "batch", "/v1/judge", {"submissions": submissions}, judge
    if kind < 0.90:
        path, body = rng.choice(
            [
                ("/run_code", {"code": token, "language": "cobol"}),
                ("/run_code", {"language": "python"}),
                ("/api/v2/execute", {"language": "python", "files": []}),
                ("/v1/judge", {"submissions": []}),
            ]
        )

        def refused(answer: httpx.Response) -> None:
            assert answer.status_code in (400, 422) and answer.json()["message"], answer.text

        return "malformed", path, body, refused
    code = f"print({token!r}, flush=True)\n" + rng.choice(HOSTILE)

    def contained(answer: httpx.Response) -> None:
        body = answer.json()
        assert answer.status_code == 200 and body["status"] == "Failed", body
        assert body["run_result"]["stdout"].startswith(token), body["run_result"]["stdout"][:100]

    hostile = {"code": code, "language": "python", "run_timeout": 1, "memory_limit_MB": 128}
    return "hostile", "/run_code", hostile, contained


def test_ten_thousand_mixed_requests(language_images: None) -> None:
    server = Server("runc", "--max-pending", "1024", "--log-level", "warning", api_key=None)
    rng = random.Random(20261126)
    requests = [request(index, rng) for index in range(TOTAL)]
    answered: dict[int, float] = {}
    failures: list[str] = []
    retries = 0
    peak_rss_mb = 0.0
    process = psutil.Process(server.process.pid)

    async def client(queue: list[int], http: httpx.AsyncClient) -> None:
        nonlocal retries
        while queue:
            index = queue.pop()
            _, path, body, check = requests[index]
            started = time.perf_counter()
            while True:
                answer = await http.post(path, json=body)
                if answer.status_code != 429:
                    break
                retries += 1
                await anyio.sleep(float(answer.headers["retry-after"]))
            if index in answered:
                failures.append(f"request {index} answered twice")
            answered[index] = time.perf_counter() - started
            try:
                check(answer)
            except (AssertionError, ValueError, KeyError) as exc:
                failures.append(f"request {index} ({path}): {exc}"[:500])

    async def watch_memory(stop: anyio.Event) -> None:
        nonlocal peak_rss_mb
        while not stop.is_set():
            peak_rss_mb = max(peak_rss_mb, process.memory_info().rss / 2**20)
            await anyio.sleep(1)

    async def main() -> float:
        queue = list(range(TOTAL - 1, -1, -1))
        stop = anyio.Event()
        limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
        started = time.perf_counter()
        async with httpx.AsyncClient(base_url=server.url, timeout=300, limits=limits) as http:
            async with anyio.create_task_group() as group:
                group.start_soon(watch_memory, stop)
                async with anyio.create_task_group() as clients:
                    for _ in range(CLIENTS):
                        clients.start_soon(client, queue, http)
                stop.set()
            metrics = (await http.get("/metrics")).text
        assert "airlock_containers_in_flight 0.0" in metrics and "airlock_queue_depth 0.0" in metrics
        return time.perf_counter() - started

    try:
        elapsed = anyio.run(main)
    finally:
        output = server.stop()
    assert "Traceback" not in output
    assert not failures, failures[:20]
    assert sorted(answered) == list(range(TOTAL))
    by_dialect: dict[str, list[float]] = {}
    for index, seconds in answered.items():
        by_dialect.setdefault(requests[index][0], []).append(seconds)

    def percentiles(samples: list[float]) -> str:
        ordered = sorted(samples)
        pick = [ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000 for q in (0.95, 0.99)]
        return f"p50 {statistics.median(ordered) * 1000:.0f} ms, p95 {pick[0]:.0f} ms, p99 {pick[1]:.0f} ms"

    print(
        f"\n{TOTAL} requests from {CLIENTS} clients in {elapsed:.0f} s ({TOTAL / elapsed:.1f}/s), "
        f"{retries} retried 429s"
    )
    print(f"  all: {percentiles(list(answered.values()))}; server peak RSS {peak_rss_mb:.0f} MB")
    for dialect, samples in sorted(by_dialect.items()):
        print(f"  {dialect} ({len(samples)}): {percentiles(samples)}")
    assert peak_rss_mb < MEMORY_BOUND_MB
