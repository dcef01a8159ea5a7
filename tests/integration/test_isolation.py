"""The foundation's promises, proved from inside containers the engine started.

Each test runs a small program through the public API and asserts the specific denial or
outcome, not merely a failure.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from engine import Limits, Outcome, SyncEngine

pytestmark = pytest.mark.docker


def probe(engine: SyncEngine, code: str, limits: Limits | None = None, stdin: str = "") -> Any:
    result = engine.run(textwrap.dedent(code), stdin=stdin, limits=limits)
    assert result.outcome is Outcome.OK, (result.outcome, result.stderr, result.error)
    return json.loads(result.stdout)


def test_our_seccomp_profile_is_active(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json, socket
        status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
        try:
            socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            inet = "created"
        except OSError as exc:
            inet = exc.errno
        print(json.dumps({"seccomp": status["Seccomp"].strip(), "filters": status.get("Seccomp_filters", "").strip(),
                          "inet": inet}))
    """,
    )
    assert facts["seccomp"] == "2"  # filter mode
    # Docker's built-in profile allows AF_INET; only ours answers EAFNOSUPPORT (97).
    assert facts["inet"] == 97


def test_no_capabilities_and_no_new_privileges(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json
        fields = dict(l.split(":\\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\\t" in l)
        names = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs")
        print(json.dumps({k: fields[k].strip() for k in names}))
    """,
    )
    assert {facts[k] for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")} == {"0000000000000000"}
    assert facts["NoNewPrivs"] == "1"


def test_runs_as_unprivileged_user(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json, os
        print(json.dumps({"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups()}))
    """,
    )
    uid = facts["uid"]
    settings = engine.settings
    assert settings.sandbox_uid_first <= uid < settings.sandbox_uid_first + settings.sandbox_uid_count
    assert facts == {"uid": uid, "euid": uid, "gid": uid, "groups": [uid]}


def test_only_loopback_interface(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json, os
        devices = [line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:]]
        routes = open("/proc/net/route").read().splitlines()[1:]
        print(json.dumps({"devices": sorted(devices), "sysfs": sorted(os.listdir("/sys/class/net")), "routes": routes}))
    """,
    )
    assert facts["devices"] == ["lo"]
    assert facts["sysfs"] == ["lo"]
    assert facts["routes"] == []


@pytest.mark.parametrize(("family", "name"), [(2, "AF_INET"), (10, "AF_INET6"), (40, "AF_VSOCK"), (16, "AF_NETLINK")])
def test_socket_families_other_than_unix_are_refused(engine: SyncEngine, family: int, name: str) -> None:
    facts = probe(
        engine,
        f"""
        import json, socket
        kind = socket.SOCK_DGRAM if {family} == 16 else socket.SOCK_STREAM
        try:
            socket.socket({family}, kind)
            print(json.dumps({{"errno": None}}))
        except OSError as exc:
            print(json.dumps({{"errno": exc.errno}}))
    """,
    )
    assert facts["errno"] == 97, f"{name} socket was not refused with EAFNOSUPPORT"


def test_unix_sockets_still_work(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json, socket
        a, b = socket.socketpair()
        a.sendall(b"ping")
        print(json.dumps({"got": b.recv(4).decode()}))
    """,
    )
    assert facts["got"] == "ping"


def test_root_filesystem_is_read_only(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json
        root = next(line.split() for line in open("/proc/mounts") if line.split()[1] == "/")
        errors = {}
        for path in ("/var/tmp/x", "/x", "/usr/lib/python3/dist-packages/x.py", "/opt/airlock/x"):
            try:
                open(path, "w")
                errors[path] = None
            except OSError as exc:
                errors[path] = exc.errno
        print(json.dumps({"options": root[3].split(","), "errors": errors}))
    """,
    )
    assert "ro" in facts["options"]
    assert set(facts["errors"].values()) == {30}  # EROFS everywhere, not a permission accident


def test_tmpfs_fills_up_at_its_size(engine: SyncEngine, small_limits: Limits) -> None:
    facts = probe(
        engine,
        """
        import json
        written = 0
        chunk = b"x" * 65536
        try:
            with open("/tmp/fill", "wb") as f:
                while written < 64 * 1024 * 1024:
                    f.write(chunk)
                    f.flush()
                    written += len(chunk)
            errno = None
        except OSError as exc:
            errno = exc.errno
        print(json.dumps({"written": written, "errno": errno}))
    """,
        limits=small_limits,
    )
    assert facts["errno"] == 28  # ENOSPC
    assert 6 * 2**20 <= facts["written"] <= 8 * 2**20


def test_pids_limit_caps_process_count(engine: SyncEngine, small_limits: Limits) -> None:
    facts = probe(
        engine,
        """
        import json, os, time
        children, error = [], None
        for _ in range(1000):
            try:
                pid = os.fork()
            except OSError as exc:
                error = exc.errno
                break
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            children.append(pid)
        print(json.dumps({"forked": len(children), "errno": error}))
    """,
        limits=small_limits,
    )
    assert facts["errno"] == 11  # EAGAIN from the pids cgroup
    assert 10 < facts["forked"] < small_limits.pids


def test_fork_bomb_is_contained(engine: SyncEngine, small_limits: Limits) -> None:
    bomb = engine.run(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        limits=small_limits.with_time(1),
    )
    assert bomb.outcome is Outcome.TIMEOUT
    assert engine.run("print('still fine')").stdout == "still fine\n"


def test_memory_bomb_is_reported_as_memory_limit(engine: SyncEngine, small_limits: Limits) -> None:
    result = engine.run(
        "blocks = []\nwhile True:\n    blocks.append(bytearray(8 * 1024 * 1024))\n", limits=small_limits
    )
    assert result.outcome is Outcome.MEMORY_LIMIT
    assert result.signal == 9


def test_infinite_loop_is_killed_at_the_deadline(engine: SyncEngine) -> None:
    result = engine.run("while True:\n    pass\n", limits=Limits(wall_time_s=1))
    assert result.outcome is Outcome.TIMEOUT
    assert 1.0 <= (result.usage.wall_time_s or 0.0) < 3.0


def test_output_flood_stops_at_the_cap(engine: SyncEngine, small_limits: Limits) -> None:
    result = engine.run("while True:\n    print('x' * 999)\n", limits=small_limits)
    assert result.outcome is Outcome.OUTPUT_LIMIT
    assert result.stdout_truncated
    assert len(result.stdout.encode()) == small_limits.output_bytes
    assert (result.usage.wall_time_s or 0.0) < small_limits.wall_time_s


def test_stderr_flood_stops_at_the_cap(engine: SyncEngine, small_limits: Limits) -> None:
    result = engine.run("import sys\nwhile True:\n    sys.stderr.write('e' * 999)\n", limits=small_limits)
    assert result.outcome is Outcome.OUTPUT_LIMIT
    assert result.stderr_truncated and len(result.stderr.encode()) == small_limits.output_bytes


def test_submission_cannot_reach_the_result_channel(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json, os, signal
        attempts = {}
        for name, action in {
            "write /proc/1/fd/1": lambda: open("/proc/1/fd/1", "w").write("forged"),
            "read /proc/1/mem": lambda: open("/proc/1/mem", "rb").read(1),
            "read /proc/1/environ": lambda: open("/proc/1/environ", "rb").read(),
            "kill pid 1": lambda: os.kill(1, signal.SIGKILL),
        }.items():
            try:
                action()
                attempts[name] = "allowed"
            except OSError as exc:
                attempts[name] = exc.errno
        print(json.dumps(attempts))
    """,
    )
    assert facts["write /proc/1/fd/1"] == 13
    assert facts["read /proc/1/mem"] == 13
    assert facts["read /proc/1/environ"] == 13
    # The kernel ignores a signal to a namespace's init that it has no handler for: no error, no effect.
    assert facts["kill pid 1"] == "allowed"


def test_limits_are_enforced_by_cgroups(engine: SyncEngine) -> None:
    limits = Limits(memory_mb=300, pids=100, cpus=0.5)
    facts = probe(
        engine,
        """
        import json
        read = lambda p: open(p).read().strip()
        print(json.dumps({
            "memory": int(read("/sys/fs/cgroup/memory/memory.limit_in_bytes")),
            "memsw": int(read("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes")),
            "pids": read("/sys/fs/cgroup/pids/pids.max"),
            "quota": int(read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")),
            "period": int(read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")),
        }))
    """,
        limits=limits,
    )
    assert facts["memory"] == facts["memsw"] == 300 * 2**20
    assert facts["pids"] == "100"
    assert facts["quota"] / facts["period"] == pytest.approx(0.5)


def test_ulimits(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json, resource
        print(json.dumps({name: resource.getrlimit(getattr(resource, name))
                          for name in ("RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_CORE")}))
    """,
        limits=Limits(open_files=100, file_size_mb=5),
    )
    assert facts == {"RLIMIT_NOFILE": [100, 100], "RLIMIT_FSIZE": [5 * 2**20] * 2, "RLIMIT_CORE": [0, 0]}


def test_ipc_and_hostname_are_private(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json, os, socket
        print(json.dumps({"hostname": socket.gethostname(), "cgroup": open("/proc/self/cgroup").read().split()[0]}))
    """,
    )
    assert facts["hostname"] == "sandbox"
    assert facts["cgroup"].endswith(":/")  # private cgroup namespace hides the container id


def test_scientific_stack_is_available(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json, numpy, scipy, pandas, sympy, networkx, sortedcontainers, multiprocessing
        with multiprocessing.Pool(2) as pool:
            squares = pool.map(abs, [-1, -2, -3])
        print(json.dumps({"inv": numpy.linalg.inv(numpy.eye(2)).tolist(), "pool": squares}))
    """,
    )
    assert facts == {"inv": [[1.0, 0.0], [0.0, 1.0]], "pool": [1, 2, 3]}


def test_matplotlibs_toolkits_import_without_the_startup_shim(engine: SyncEngine) -> None:
    """The image drops matplotlib's namespace .pth (4 ms of every worker's start): the toolkits
    still import, as the namespace package Python makes of their folder."""
    facts = probe(
        engine,
        """
        import importlib.util, json, sys
        shimmed = "mpl_toolkits" in sys.modules
        found = importlib.util.find_spec("mpl_toolkits.mplot3d")  # matplotlib itself is not imported
        import mpl_toolkits
        print(json.dumps({"shimmed": shimmed, "found": found.origin, "path": list(mpl_toolkits.__path__)}))
    """,
    )
    folder = "/usr/lib/python3/dist-packages/mpl_toolkits"
    assert facts == {"shimmed": False, "found": f"{folder}/mplot3d/__init__.py", "path": [folder]}


def test_distutils_is_the_standard_librarys_without_the_startup_shim(engine: SyncEngine) -> None:
    """The image drops setuptools' distutils .pth (0.5 ms of every worker's start, and a finder in
    front of every import the program makes): ``import distutils`` still works, from the standard
    library."""
    facts = probe(
        engine,
        """
        import json, sys, warnings
        finders = [type(finder).__name__ for finder in sys.meta_path]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import distutils.core
        print(json.dumps({"finders": finders, "distutils": distutils.__file__}))
    """,
    )
    assert "DistutilsMetaFinder" not in facts["finders"]
    assert facts["distutils"] == "/usr/lib/python3.11/distutils/__init__.py"
