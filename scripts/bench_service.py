"""What HTTP costs: SandboxFusion's ``/run_code`` through `airlock serve` on loopback against the
same programs through ``Engine.run`` in this process, same runtime, same concurrency, one run
each after a warm-up, alternated twice so that a noisy neighbour hits both sides alike.

Prints requests per second each way and the ratio (HTTP / in-process; 1.0 means HTTP is free).
"""

from __future__ import annotations

import argparse
import signal
import socket
import tempfile
import time
from collections.abc import Awaitable, Callable

import anyio
import httpx
from bench_sessions import start_server

from engine import Engine, Settings

PROGRAM = "import sys\nprint(sys.stdin.read()[::-1])\n"


async def over_http(url: str, count: int, concurrency: int) -> float:
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:

        async def one(index: int) -> None:
            body = {"code": PROGRAM, "stdin": f"request {index}", "language": "python"}
            answer = (await http.post("/run_code", json=body)).json()
            assert answer["run_result"]["stdout"] == f"request {index}"[::-1] + "\n", answer

        return await _timed(one, count, concurrency)


async def in_process(engine: Engine, count: int, concurrency: int) -> float:
    async def one(index: int) -> None:
        result = await engine.run(PROGRAM, stdin=f"request {index}")
        assert result.stdout == f"request {index}"[::-1] + "\n", result

    return await _timed(one, count, concurrency)


async def _timed(one: Callable[[int], Awaitable[None]], count: int, concurrency: int) -> float:
    pending = list(range(count))
    started = time.perf_counter()

    async def worker() -> None:
        while pending:
            await one(pending.pop())

    async with anyio.create_task_group() as group:
        for _ in range(concurrency):
            group.start_soon(worker)
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=300, help="requests per measurement")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--runtime", choices=["docker", "oci"], default="docker", help="for both sides")
    args = parser.parse_args()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    rates: dict[str, list[float]] = {"http": [], "in-process": []}
    with tempfile.NamedTemporaryFile() as log:
        for _ in range(2):

            async def engine_side() -> float:
                async with Engine(Settings(runtime=args.runtime)) as engine:
                    await in_process(engine, args.concurrency * 4, args.concurrency)  # warm-up: the pool learns
                    return await in_process(engine, args.count, args.concurrency)

            rates["in-process"].append(anyio.run(engine_side))
            server = start_server(port, log, "--log-level", "warning", "--runtime", args.runtime)
            try:
                url = f"http://127.0.0.1:{port}"
                anyio.run(over_http, url, args.concurrency * 4, args.concurrency)
                rates["http"].append(anyio.run(over_http, url, args.count, args.concurrency))
            finally:
                server.send_signal(signal.SIGINT)
                server.wait(timeout=120)
    http, local = max(rates["http"]), max(rates["in-process"])
    print(f"/run_code over HTTP: {http:.1f} requests/s (runs: {', '.join(f'{r:.1f}' for r in rates['http'])})")
    print(f"Engine.run in-process: {local:.1f} runs/s (runs: {', '.join(f'{r:.1f}' for r in rates['in-process'])})")
    where = f"concurrency {args.concurrency}, {args.runtime} runtime"
    print(f"ratio (HTTP / in-process, best of each): {http / local:.2f}x at {where}")


if __name__ == "__main__":
    main()
