"""Where one submission's CPU goes, on each runtime.

Judges the same 10-test stdin submission (its tests in one process, the default) ROUNDS times,
one after another (nothing else of ours runs meanwhile, so each share can be told apart), and
prints CPU milliseconds per submission:

- host engine: this process (asyncio, JSON, validation, the runtime driver), with the
  functions that cost most by cProfile, grouped by package;
- OCI runtime: what this process's children used (``runc`` and, through it, the container:
  the harness, the worker, the tests); Docker runtime: what dockerd and containerd used (their
  shims and the container are not visible from here: the ``container`` line is then the
  machine's remaining CPU in the window, noise from other tenants included);
- tests: the program's own CPU in each test, as the harness measured it.

Then, for the OCI runtime, the container's share split into its parts by difference, each
measured the same way in this run: the OCI binary alone (each binary installed: a container of
the same config running ``/bin/true``), a Python interpreter's start in it (``python3 -I -S -c
pass``), the harness with the program loaded (a one-test submission less one test), the
cost of each added test with a process of its own (a ten-test submission against a one-test one),
and that cost's floor (an interpreter that forks children that exit at once);
then the cost of each added test where a submission's tests share one process.

Usage: scripts/bench profile [ROUNDS] (default 40)
"""

from __future__ import annotations

import collections
import contextlib
import cProfile
import json
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_rounds import rounds_argument

from engine import Engine, Limits, Settings, StdinTest, Submission
from engine.runtime import OCI_BINARIES, ContainerSpec, OciRuntime, UidPool, choose_oci_binary
from engine.runtime._labels import Owner
from engine.runtime._oci import ETC_FILES, oci_config
from engine.runtime._policy import Policy

CODE = "a, b = map(int, input().split())\nprint(a + b)\n"
DAEMONS = ("dockerd", "containerd")


def submission(tests: int = 10, *, process_per_test: bool | None = None) -> Submission:
    return Submission(
        code=CODE,
        tests=[StdinTest(input=f"{i} {i}", expected_output=str(2 * i)) for i in range(tests)],
        process_per_test=process_per_test,
    )


def _cpu(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def _daemons_cpu() -> float:
    total = 0.0
    for process in psutil.process_iter(["name", "cpu_times"]):
        if process.info["name"] in DAEMONS and process.info["cpu_times"]:
            total += process.info["cpu_times"].user + process.info["cpu_times"].system
    return total


def _machine_cpu() -> float:
    times = psutil.cpu_times()
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


def _package(filename: str) -> str:
    for marker in ("/engine/", "/anyio/", "/pydantic", "/docker/", "/json/", "/asyncio/", "/selectors", "/ssl"):
        if marker in filename:
            return marker.strip("/")
    return "other" if filename.startswith("/") else "builtins"


def profile(runtime: str, rounds: int) -> None:
    job = submission()

    async def main() -> tuple[dict[str, float], pstats.Stats]:
        async with Engine(Settings(runtime=runtime)) as engine:
            for _ in range(5):  # the pool learns the kind; images are unpacked
                await engine.judge(job)
            await anyio.sleep(1)
            profiler = cProfile.Profile(time.process_time)  # CPU, not the wall time spent waiting
            tests_cpu = 0.0
            self_before, children_before = (
                resource.getrusage(resource.RUSAGE_SELF),
                resource.getrusage(resource.RUSAGE_CHILDREN),
            )
            daemons_before, machine_before, wall_before = _daemons_cpu(), _machine_cpu(), time.perf_counter()
            for _ in range(rounds):
                result = await engine.judge(job)
                assert result.ok, result.first_failure
                tests_cpu += sum(test.usage.cpu_time_s or 0.0 for test in result.tests)
            await anyio.sleep(0.5)  # removals finish
            wall = time.perf_counter() - wall_before
            host = _cpu(resource.getrusage(resource.RUSAGE_SELF)) - _cpu(self_before)
            children = _cpu(resource.getrusage(resource.RUSAGE_CHILDREN)) - _cpu(children_before)
            daemons = _daemons_cpu() - daemons_before
            machine = _machine_cpu() - machine_before
            # The profiler about doubles the CPU it watches: the shares come from rounds of their own.
            profiler.enable()
            for _ in range(rounds):
                await engine.judge(job)
            profiler.disable()
            await anyio.sleep(0.5)
        shares = {"wall": wall, "host": host, "children": children, "daemons": daemons, "machine": machine}
        shares["tests"] = tests_cpu
        return shares, pstats.Stats(profiler)

    shares, stats = anyio.run(main)
    per = {name: value / rounds * 1000 for name, value in shares.items()}
    print(f"\n{runtime} runtime, {rounds} sequential 10-test stdin submissions: ms of CPU per submission")
    print(f"  wall time                      {per['wall']:7.1f} ms")
    print(f"  host engine (this process)     {per['host']:7.1f}")
    if runtime == "oci":
        print(f"  runc + container (children)    {per['children']:7.1f}")
        print(f"    of which the tests' programs {per['tests']:7.1f}  ({per['tests'] / 10:.2f} per test)")
        print(f"    runc, harness, worker        {per['children'] - per['tests']:7.1f}")
    else:
        print(f"  dockerd + containerd           {per['daemons']:7.1f}")
        rest = per["machine"] - per["host"] - per["daemons"]
        print(f"  container, shims, others       {rest:7.1f}  (the machine's remaining CPU; noisy)")
        print(f"    of which the tests' programs {per['tests']:7.1f}  ({per['tests'] / 10:.2f} per test)")
    by_package: collections.Counter[str] = collections.Counter()
    for (filename, _, _), (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        by_package[_package(filename)] += own
    total = sum(by_package.values()) or 1.0
    print("  host engine's own CPU by package (cProfile's self time, in rounds of their own, scaled to the above):")
    for package, seconds in by_package.most_common(8):
        print(f"    {package:12} {seconds / total * per['host']:6.1f} ms  {seconds / total:5.1%}")


def children_cpu_s() -> float:
    """CPU seconds of the reaped children of this process (and theirs)."""
    return _cpu(resource.getrusage(resource.RUSAGE_CHILDREN))


def _mtime(path: Path) -> float:
    return path.stat().st_mtime


def compiled_seccomp(binary: str) -> str | None:
    """Our profile as ``binary`` compiles it, which the OCI runtime hands to crun with every
    container (runc takes none)."""

    async def opened() -> str | None:
        settings = Settings()
        runtime = OciRuntime(Owner(), UidPool(settings.sandbox_uid_first, settings.sandbox_uid_count), binary=binary)
        await runtime.open()
        try:
            return runtime._seccomp_bpf.get(False)
        finally:
            await runtime.aclose()

    return anyio.run(opened)


def bare_container_ms(binary: str, args: list[str], rounds: int) -> float:
    """CPU ms of one container of the engine's own config (policy, seccomp, mounts) running
    ``args`` from the unpacked Python image, started by ``binary``: no harness, no request."""
    seccomp_bpf = compiled_seccomp(binary)
    unpacked = [ready.parent for ready in Path("/var/lib/airlock/oci/images").glob("*/ready")]
    image = max((f for f in unpacked if (f / "ready").read_text().startswith("airlock/python:")), key=_mtime)
    policy = Policy.for_purpose(Limits(), "runc")
    owner = Owner()
    spec = ContainerSpec(image=(image / "ready").read_text(), policy=policy, labels=owner.labels("bench"))
    with contextlib.ExitStack() as cleanup, tempfile.TemporaryDirectory() as folder:
        cleanup.callback(owner.release)
        scratch = Path(folder)
        for name, text in ETC_FILES.items():
            (scratch / name).write_text(text)
        before = children_cpu_s()
        for _ in range(rounds):
            container_id = f"airlock-bench-{uuid.uuid4().hex[:12]}"
            bundle = scratch / container_id
            bundle.mkdir()
            config = oci_config(spec, container_id, image / "rootfs", args, 65534, scratch, seccomp_bpf=seccomp_bpf)
            (bundle / "config.json").write_text(json.dumps(config))
            command = [binary, "--root", str(scratch / "state"), "run", "--bundle", str(bundle), container_id]
            subprocess.run(command, check=True, stdin=subprocess.DEVNULL, capture_output=True)
        return (children_cpu_s() - before) / rounds * 1000


# A test's floor with a process of its own: a Python interpreter forks and reaps a child that
# exits at once, in a container of our config.
FORKS = 200
FORK_LOOP = f"""import os
for _ in range({FORKS}):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
"""


def container_parts(rounds: int) -> None:
    """The OCI runtime's container CPU, split into parts by difference."""

    async def judged_ms(tests: int, process_per_test: bool) -> float:
        job = submission(tests, process_per_test=process_per_test)
        async with Engine(Settings(runtime="oci")) as engine:
            for _ in range(3):
                await engine.judge(job)
            before = children_cpu_s()
            for _ in range(rounds):
                assert (await engine.judge(job)).ok
            await anyio.sleep(0.5)
            return (children_cpu_s() - before) / rounds * 1000

    one, ten = anyio.run(judged_ms, 1, True), anyio.run(judged_ms, 10, True)
    per_test = (ten - one) / 9
    shared = (anyio.run(judged_ms, 10, False) - anyio.run(judged_ms, 1, False)) / 9
    print(f"\noci runtime: the container's CPU in parts (ms per submission, {rounds} rounds each)")
    binaries = [found for name in OCI_BINARIES if (found := shutil.which(name))]
    for binary in binaries:
        bare = bare_container_ms(binary, ["/bin/true"], rounds)
        python = bare_container_ms(binary, ["python3", "-I", "-S", "-c", "pass"], rounds)
        print(f"  {Path(binary).name}: a container running /bin/true          {bare:7.1f}")
        print(f"  {Path(binary).name}: + a Python interpreter's start          {python - bare:7.1f}")
    engine_binary = choose_oci_binary()
    bare = bare_container_ms(engine_binary, ["python3", "-I", "-S", "-c", "pass"], rounds)
    forked = bare_container_ms(engine_binary, ["python3", "-I", "-S", "-c", FORK_LOOP], rounds)
    print(f"  the harness, its worker, the program loaded ({Path(engine_binary).name}) {one - per_test - bare:7.1f}")
    print(f"  each test with a process of its own              {per_test:7.1f}  (10 tests: {10 * per_test:.1f})")
    print(f"    its floor: an interpreter's fork and exit      {(forked - bare) / FORKS:7.2f}")
    print(f"  each test of tests that share a process          {shared:7.1f}  (the default)")
    print(f"  a 10-test submission, a process per test         {ten:7.1f}")


def main() -> None:
    rounds = rounds_argument(__doc__, 40)
    for runtime in ("oci", "docker"):
        profile(runtime, rounds)
    container_parts(rounds)


if __name__ == "__main__":
    main()
