"""Sessions through `airlock serve`, measured with the unmodified E2B SDKs on loopback.

- create-to-first-command: ``Sandbox.create()`` then ``commands.run("true")``, sequential, from
  the warm pool (E2B publishes about 150 ms for its own; the target here is a p50 under 100 ms);
- ``run_code("print(1)")`` round trip on a warm context, and a context's first cell; the same in
  JavaScript and Bash;
- a GET of a server in the sandbox through its URL (``get_host``);
- ``Volume.create``, create-to-first-command with a volume mounted, a 1 MiB ``write_file`` and
  ``read_file`` from outside;
- ``pause()`` and the ``Sandbox.connect`` that resumes, in memory (frozen in place) and to disk
  (``mode="filesystem"``, with 10 MB of files), and ``get_metrics()``;
- the server's memory with 64 sandboxes alive, and the CPU those sandboxes use while idle;

each on the Docker runtime and on the OCI runtime (crun or runc driven directly), one after the other.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
API_KEY = "e2b_" + "b2" * 20


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000, 1),
    }


def timed(work: Callable[[], object], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        samples.append(time.perf_counter() - started)
    return samples


def start_server(port: int, log: IO[bytes], *flags: str) -> subprocess.Popen[bytes]:
    """``airlock serve`` on loopback with ``flags``, once it answers."""
    command = [sys.executable, "-m", "engine", "serve", "--port", str(port), *flags]
    server = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("airlock serve did not start")


def tree_cpu_s(uids: set[int]) -> float:
    total = 0.0
    for process in psutil.process_iter(["uids", "cpu_times"]):
        info = process.info
        if info["uids"] and info["uids"].real in uids and info["cpu_times"]:
            total += info["cpu_times"].user + info["cpu_times"].system
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--alive", type=int, default=64, help="sandboxes alive for the memory and idle CPU figures")
    parser.add_argument(
        "--runtime",
        choices=("docker", "oci", "both"),
        default="both",
        help="the sandboxes' runtime (both: side by side)",
    )
    args = parser.parse_args()
    for runtime in ("docker", "oci") if args.runtime == "both" else (args.runtime,):
        print(f"== sandboxes on the {runtime} runtime")
        measure(runtime, args)


def measure(runtime: str, args: argparse.Namespace) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    os.environ.update(E2B_API_KEY=API_KEY, E2B_API_URL=url, E2B_SANDBOX_URL=url, E2B_VOLUME_API_URL=url)
    os.environ.pop("E2B_DEBUG", None)
    import e2b
    import e2b_code_interpreter

    with tempfile.TemporaryFile() as log, tempfile.TemporaryDirectory() as paused_dir:
        server = start_server(port, log, "--api-key", API_KEY, "--runtime", runtime, "--paused-dir", paused_dir)
        try:
            first_command = []
            for round_number in range(args.rounds + 3):
                started = time.perf_counter()
                fresh = e2b.Sandbox.create(timeout=60)
                fresh.commands.run("true")
                if round_number >= 3:  # the first ones teach the pool the kind
                    first_command.append(time.perf_counter() - started)
                fresh.kill()
                time.sleep(0.2)  # as between a trainer's rollouts: the pool refills

            volume_made, with_volume = [], []
            for round_number in range(args.rounds):
                started = time.perf_counter()
                volume = e2b.Volume.create(f"bench-{round_number}")
                volume_made.append(time.perf_counter() - started)
                started = time.perf_counter()
                mounting = e2b.Sandbox.create(timeout=60, volume_mounts={"/mnt/data": volume})
                mounting.commands.run("true")
                with_volume.append(time.perf_counter() - started)
                mounting.kill()
                e2b.Volume.destroy(volume.volume_id)
            volume = e2b.Volume.create("bench-files")
            payload = os.urandom(1 << 20)
            volume_written = timed(lambda: volume.write_file("/file.bin", payload), args.rounds)
            volume_read = timed(lambda: volume.read_file("/file.bin", format="bytes"), args.rounds)
            e2b.Volume.destroy(volume.volume_id)

            sandbox = e2b_code_interpreter.Sandbox.create(timeout=600)
            first_cell = timed(lambda: sandbox.run_code("print(1)"), 1)
            round_trip = timed(lambda: sandbox.run_code("print(1)"), args.rounds)
            command = timed(lambda: sandbox.commands.run("true"), args.rounds)
            sandbox.commands.run("python3 -m http.server 8000 --bind 127.0.0.1", background=True)
            while httpx.get(f"{url}/", headers={"Host": sandbox.get_host(8000)}).status_code != 200:
                time.sleep(0.05)
            port_request = timed(lambda: httpx.get(f"{url}/", headers={"Host": sandbox.get_host(8000)}), args.rounds)
            other_cells = {
                language: (
                    timed(functools.partial(sandbox.run_code, "1", language=language), 1),
                    timed(functools.partial(sandbox.run_code, "1", language=language), args.rounds),
                )
                for language in ("javascript", "bash")
            }
            metrics = timed(sandbox.get_metrics, args.rounds)
            metrics_apart = []
            for _ in range(5):
                time.sleep(2.5)
                metrics_apart += timed(sandbox.get_metrics, 1)
            paused, resumed = [], []
            for _ in range(args.rounds):
                paused += timed(sandbox.pause, 1)
                resumed += timed(lambda: e2b.Sandbox.connect(sandbox.sandbox_id), 1)
            sandbox.commands.run("head -c 10000000 /dev/urandom > kept.bin")
            to_disk, from_disk = [], []
            for _ in range(args.rounds):
                to_disk += timed(functools.partial(sandbox.pause, mode="filesystem"), 1)
                from_disk += timed(lambda: e2b.Sandbox.connect(sandbox.sandbox_id), 1)
            sandbox.kill()

            alive = [e2b.Sandbox.create(timeout=600) for _ in range(args.alive)]
            uids = {int(s.commands.run("id -u").stdout) for s in alive}
            time.sleep(2)
            rss_mb = psutil.Process(server.pid).memory_info().rss / 2**20
            before = tree_cpu_s(uids)
            server_before = sum(psutil.Process(server.pid).cpu_times()[:2])
            time.sleep(10)
            idle_cpu = tree_cpu_s(uids) - before
            server_idle = sum(psutil.Process(server.pid).cpu_times()[:2]) - server_before
            for sandbox in alive:
                sandbox.kill()
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=120)

    print("create-to-first-command (Sandbox.create + commands.run('true'), warm pool):", percentiles(first_command))
    print("commands.run('true') in a live sandbox:", percentiles(command))
    print("GET of a sandbox's port through its URL (get_host, python3 -m http.server):", percentiles(port_request))
    print("Volume.create:", percentiles(volume_made))
    print("create-to-first-command with a volume mounted (no warm pool):", percentiles(with_volume))
    print("Volume.write_file of 1 MiB:", percentiles(volume_written), "read_file:", percentiles(volume_read))
    print("run_code('print(1)'): first cell of a context", percentiles(first_cell), "then", percentiles(round_trip))
    for language, (first, then) in other_cells.items():
        print(f"run_code('1', language={language!r}): first cell", percentiles(first), "then", percentiles(then))
    # Docker's stats answer at once when none were asked for lately, else at its next sample (1 s).
    print("get_metrics(): 2.5 s apart", percentiles(metrics_apart), "back to back", percentiles(metrics))
    print("pause():", percentiles(paused), "Sandbox.connect that resumes:", percentiles(resumed))
    print(
        "pause(mode='filesystem') with 10 MB of files:",
        percentiles(to_disk),
        "Sandbox.connect that resumes it:",
        percentiles(from_disk),
    )
    print(f"server memory with {args.alive} sandboxes alive: {rss_mb:.0f} MB (RSS)")
    print(f"CPU used in 10 s by {args.alive} idle sandboxes: {idle_cpu:.2f} s; by the server: {server_idle:.2f} s")


if __name__ == "__main__":
    main()
