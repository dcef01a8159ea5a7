"""Attacks that must fail, one test per attack, through the public API, on every tier.

Each program tries one thing and reports what happened as JSON; the test asserts the specific
denial (or, for resource attacks, the specific verdict). Under gVisor some denials come from
gVisor's own kernel with its own errno (Debian's runsc answers EPERM where our profile asks
for another errno); those expectations say so.
"""

from __future__ import annotations

import errno
import json
import signal
import textwrap
import time
from typing import Any

import pytest
from probes import DANGEROUS_SYSCALLS, SOCKET_FAMILIES, SYSCALL

from engine import Limits, Outcome, StdinTest, Submission, SyncEngine

pytestmark = pytest.mark.docker

SMALL = Limits(wall_time_s=5, memory_mb=256, tmpfs_mb=16, shm_mb=8, pids=64, output_bytes=64 * 1024, open_files=128)
REFUSED = {"runc": {errno.EAFNOSUPPORT}, "gvisor": {errno.EPERM, errno.EAFNOSUPPORT}}


def probe(engine: SyncEngine, code: str, limits: Limits = SMALL, *, syscalls: bool = False) -> Any:
    """Run ``code`` (with a ``call(number, *args)`` helper for raw syscalls if asked) and parse its JSON."""
    result = engine.run((SYSCALL if syscalls else "") + textwrap.dedent(code), limits=limits)
    assert result.outcome is Outcome.OK, (result.outcome, result.stderr[-2000:], result.error)
    return json.loads(result.stdout)


# -- resource exhaustion -----------------------------------------------------------------------------------


def test_fork_bomb(engine: SyncEngine, tier: str) -> None:
    started = time.monotonic()
    result = engine.run(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        limits=SMALL.with_time(1),
    )
    assert result.outcome is not Outcome.OK
    assert result.outcome in {Outcome.TIMEOUT, Outcome.RUNTIME_ERROR} or tier == "gvisor"
    assert time.monotonic() - started < 30
    assert engine.run("print('after')").stdout == "after\n"


def test_thread_bomb(engine: SyncEngine, tier: str) -> None:
    facts = probe(
        engine,
        """
        import json, threading, time
        started = 0
        try:
            while started < 5000:
                threading.Thread(target=time.sleep, args=(10,), daemon=True).start()
                started += 1
            error = None
        except RuntimeError as exc:
            error = str(exc)
        print(json.dumps({"started": started, "error": error}))
    """,
    )
    assert facts["error"] == "can't start new thread"
    # Under gVisor the count is the program's user's (RLIMIT_NPROC), and a program whose tests share
    # the worker has no process of its own beside it there: its threads reach the limit itself.
    assert facts["started"] < SMALL.pids or (tier == "gvisor" and facts["started"] == SMALL.pids)


def test_memory_bomb(engine: SyncEngine) -> None:
    result = engine.run("hoard = []\nwhile True:\n    hoard.append(b'x' * (16 * 2**20))\n", limits=SMALL)
    assert result.outcome is Outcome.MEMORY_LIMIT


@pytest.mark.parametrize(("path", "size_mb"), [("/tmp/fill", SMALL.tmpfs_mb), ("/dev/shm/fill", SMALL.shm_mb)])
def test_scratch_space_fills_at_its_size(engine: SyncEngine, path: str, size_mb: int) -> None:
    facts = probe(
        engine,
        f"""
        import json
        written, error = 0, None
        try:
            with open("{path}", "wb") as f:
                while written < 256 * 2**20:
                    f.write(b"x" * 2**20)
                    f.flush()
                    written += 2**20
        except OSError as exc:
            error = exc.errno
        print(json.dumps({{"written": written, "errno": error}}))
    """,
    )
    assert facts["errno"] == errno.ENOSPC
    assert facts["written"] <= size_mb * 2**20


def test_root_filesystem_fill(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json
        outcome = {}
        for path in ("/fill", "/var/tmp/fill", "/usr/fill", "/etc/fill", "/opt/airlock/fill", "/home/fill"):
            try:
                open(path, "wb").write(b"x")
                outcome[path] = "written"
            except OSError as exc:
                outcome[path] = exc.errno
        print(json.dumps(outcome))
    """,
    )
    assert set(facts.values()) <= {errno.EROFS, errno.EACCES, errno.ENOENT}


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_floods(engine: SyncEngine, stream: str) -> None:
    result = engine.run(f"import sys\nwhile True:\n    sys.{stream}.write('z' * 65536)\n", limits=SMALL)
    assert result.outcome is Outcome.OUTPUT_LIMIT
    assert len(getattr(result, stream).encode()) == SMALL.output_bytes


def test_cpu_spin_is_held_to_the_quota(engine: SyncEngine, tier: str) -> None:
    if tier == "gvisor":
        pytest.skip("CPU times reported inside gVisor are not trustworthy (measured 2.4x wall)")
    facts = probe(
        engine,
        """
        import json, os, time
        start = time.monotonic()
        children = []
        for _ in range(4):
            pid = os.fork()
            if pid == 0:
                end = time.monotonic() + 2
                while time.monotonic() < end:
                    pass
                os._exit(0)
            children.append(pid)
        for pid in children:
            os.waitpid(pid, 0)
        wall = time.monotonic() - start
        cpu = os.times().children_user + os.times().children_system
        print(json.dumps({"wall": wall, "cpu": cpu}))
    """,
        limits=SMALL.model_copy(update={"cpus": 1.0, "wall_time_s": 30}),
    )
    assert facts["cpu"] <= 1.2 * facts["wall"]


def test_sleep_forever_ignoring_sigterm(engine: SyncEngine) -> None:
    code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(3600)\n"
    result = engine.run(code, limits=SMALL.model_copy(update={"wall_time_s": 1}))
    assert result.outcome is Outcome.TIMEOUT and (result.usage.wall_time_s or 0) < 5


def test_orphaned_daemons_and_zombies_do_not_survive_a_test(engine: SyncEngine) -> None:
    code = textwrap.dedent("""
        import json, os, sys, time
        if input() == "spawn":
            for _ in range(20):
                if os.fork() == 0:
                    os._exit(0)          # zombies: never waited for
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:       # a daemon, re-parented away from the test
                    time.sleep(3600)
                os._exit(0)
            print("spawned")
        else:
            me = os.getpid()
            others = []
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    stat = open(f"/proc/{pid}/stat").read()
                except OSError:
                    continue
                state = stat.rpartition(")")[2].split()[0]
                if int(pid) not in (1, me, os.getppid()):
                    others.append((int(pid), state))
            print(json.dumps(others))
    """)
    submission = Submission(
        code=code,
        tests=[StdinTest(input="spawn", expected_output="spawned"), StdinTest(input="look", expected_output="[]")],
    )
    result = engine.judge(submission)
    assert result.ok, [t.stdout for t in result.tests]
    assert result.tests[0].usage.wall_time_s is not None and result.tests[0].usage.wall_time_s < 3


def test_orphans_are_reaped_while_the_test_runs(engine: SyncEngine) -> None:
    # Forty double forks: each grandchild is re-parented to PID 1 and exits while the test still
    # runs. Left unreaped, each would hold a slot of the pids limit until the container ended.
    facts = probe(
        engine,
        """
        import json, os, time
        for _ in range(40):
            if os.fork() == 0:
                if os.fork() == 0:
                    time.sleep(0.1)
                    os._exit(0)
                os._exit(0)
        for _ in range(40):
            os.wait()
        time.sleep(1.5)
        zombies = 0
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                zombies += open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0] == "Z"
            except OSError:
                pass
        print(json.dumps(zombies))
    """,
        # Up to forty forked interpreters at once: gVisor's accounting of their shared pages
        # sometimes puts them past the small memory limit, which is not what this test is about.
        limits=SMALL.model_copy(update={"pids": 128, "memory_mb": 512}),
    )
    assert facts == 0


def test_fd_exhaustion(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json, os
        fds, error = [], None
        try:
            while len(fds) < 100000:
                fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as exc:
            error = exc.errno
        print(json.dumps({"opened": len(fds), "errno": error}))
    """,
    )
    assert facts["errno"] == errno.EMFILE
    assert facts["opened"] < SMALL.open_files


def test_huge_argv_and_environment(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json, os
        outcome = {}
        for name, call in {
            "argv": lambda: os.execv("/bin/true", ["true", "x" * (64 * 2**20)]),
            "env": lambda: os.execve("/bin/true", ["true"], {"BIG": "x" * (64 * 2**20)}),
        }.items():
            pid = os.fork()
            if pid == 0:
                try:
                    call()
                except OSError as exc:
                    os._exit(100 + (exc.errno % 100))
                os._exit(1)
            outcome[name] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        print(json.dumps(outcome))
    """,
    )
    refused = {100 + errno.E2BIG, 100 + errno.ENAMETOOLONG}  # gVisor answers ENAMETOOLONG
    assert set(facts) == {"argv", "env"} and set(facts.values()) <= refused


# -- escape and host reach ---------------------------------------------------------------------------------


def test_socket_families(engine: SyncEngine, tier: str) -> None:
    facts = probe(
        engine,
        f"""
        import json, socket
        facts = {{}}
        for name, (family, kind) in {SOCKET_FAMILIES!r}.items():
            try:
                socket.socket(family, kind)
                facts[name] = "created"
            except OSError as exc:
                facts[name] = exc.errno
        print(json.dumps(facts))
    """,
    )
    refused = REFUSED[tier] | {errno.EPERM, errno.EACCES, errno.EPROTONOSUPPORT}
    assert {name: fact for name, fact in facts.items() if fact not in refused} == {}
    assert set(facts) == set(SOCKET_FAMILIES)


def test_no_route_and_no_resolver(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json, socket
        try:
            socket.getaddrinfo("deb.debian.org", 80)
            lookup = "resolved"
        except OSError as exc:
            lookup = type(exc).__name__
        print(json.dumps({"lookup": lookup, "resolv": open("/etc/resolv.conf").read(),
                          "routes": open("/proc/net/route").read().splitlines()[1:]}))
    """,
    )
    assert facts["lookup"] == "gaierror"
    assert all(word in ("nameserver", "127.0.0.1", "options", "ndots:0") for word in facts["resolv"].split())
    assert facts["routes"] == []


def test_no_daemon_socket_anywhere(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json, os, socket, stat
        sockets = []
        for top in ("/", "/run", "/var/run", "/tmp"):
            try:
                for name in os.listdir(top):
                    path = os.path.join(top, name)
                    if stat.S_ISSOCK(os.lstat(path).st_mode):
                        sockets.append(path)
            except OSError:
                pass
        reached = []
        for path in ("/var/run/docker.sock", "/run/containerd/containerd.sock", "\\0/containerd-shim"):
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(path)
                reached.append(path)
            except OSError:
                pass
        print(json.dumps({"sockets": sockets, "reached": reached}))
    """,
    )
    assert facts == {"sockets": [], "reached": []}


def test_proc_and_sys_cannot_be_written(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        """
        import json
        outcome = {}
        for path in ("/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger", "/proc/sys/vm/drop_caches",
                     "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                     "/proc/1/oom_score_adj", "/sys/kernel/uevent_helper"):
            try:
                with open(path, "w") as handle:
                    handle.write("0")
                outcome[path] = "written"
            except OSError as exc:
                outcome[path] = exc.errno
        print(json.dumps(outcome))
    """,
    )
    assert "written" not in facts.values(), facts


def test_host_kernel_secrets_stay_hidden(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        syscalls=True,
        code="""
        symbols = "missing"
        try:
            lines = open("/proc/kallsyms").read().splitlines()[:50]
            symbols = "zeroed" if all(line.startswith("0000000000000000") for line in lines) else "visible"
        except OSError:
            symbols = "unreadable"
        kcore = "readable"
        try:
            open("/proc/kcore", "rb").read(1)
        except OSError:
            kcore = "unreadable"
        print(json.dumps({"kallsyms": symbols, "kcore": kcore, "syslog": call(103, 3, 0, 0)}))
    """,
    )
    assert facts["kallsyms"] in ("zeroed", "unreadable", "missing")
    assert facts["kcore"] == "unreadable"
    assert facts["syslog"] in ("EPERM", "ENOSYS")


def test_privileged_and_dangerous_syscalls_are_refused(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        f"print(json.dumps({{name: call(number, *args) for name, number, args in {DANGEROUS_SYSCALLS!r}}}))\n",
        syscalls=True,
    )
    refused = ("EPERM", "ENOSYS", "EACCES", "EINVAL", "EFAULT", "EBADF", "ENOENT")
    assert {name: fact for name, fact in facts.items() if fact not in refused} == {}
    assert len(facts) == len(DANGEROUS_SYSCALLS)


def test_device_nodes_and_setuid_binaries(engine: SyncEngine, tier: str) -> None:
    facts = probe(
        engine,
        """
        import json, os, stat, subprocess
        try:
            os.mknod("/tmp/null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
            node = "created"
        except OSError as exc:
            node = exc.errno
        setuid = []
        for top in ("/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/libexec", "/usr/lib/openssh", "/usr/lib/dbus-1.0"):
            for root, _, files in os.walk(top):
                for name in files:
                    path = os.path.join(root, name)
                    try:
                        if os.lstat(path).st_mode & (stat.S_ISUID | stat.S_ISGID):
                            setuid.append(path)
                    except OSError:
                        pass
        devices = sorted(os.listdir("/dev"))
        print(json.dumps({"mknod": node, "setuid": setuid, "devices": devices}))
    """,
    )
    # Under gVisor a device node is a file of gVisor's own file system, backed by no host device.
    assert facts["mknod"] == errno.EPERM or (tier == "gvisor" and facts["mknod"] == "created")
    assert facts["setuid"] == []
    host_devices = {"mem", "kmem", "port", "sda", "vda", "kvm", "vsock", "fuse"}
    if tier == "gvisor":
        host_devices.discard("fuse")  # gVisor's /dev/fuse is its own, served by its kernel
    assert not host_devices & set(facts["devices"])


def test_32_bit_syscalls_kill_the_process(engine: SyncEngine, tier: str) -> None:
    facts = probe(
        engine,
        """
        import ctypes, json, mmap, os
        # mov eax, 20 (getpid in the i386 table); int 0x80; ret
        code = bytes([0xB8, 0x14, 0, 0, 0, 0xCD, 0x80, 0xC3])
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(code)
        address = ctypes.addressof(ctypes.c_char.from_buffer(page))
        pid = os.fork()
        if pid == 0:
            returned = ctypes.CFUNCTYPE(ctypes.c_int)(address)()
            os._exit(1 if returned == os.getpid() else 2)
        status = os.waitpid(pid, 0)[1]
        print(json.dumps({"signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                          "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}))
    """,
    )
    if tier == "runc":
        assert facts == {"signal": signal.SIGSYS, "exit": None}
    else:
        # gVisor has no i386 table: the call fails (exit 2) instead of running getpid (exit 1).
        assert facts["exit"] == 2 or facts["signal"] is not None


def test_native_code_is_still_inside_the_sandbox(engine: SyncEngine, tier: str) -> None:
    facts = probe(
        engine,
        syscalls=True,
        code="""
        import os, shutil
        # A raw socket(AF_INET) syscall through ctypes, bypassing Python's socket module.
        raw = call(41, 2, 1, 0)
        # A binary run from a memfd (the scratch space is noexec), asked to open a socket.
        fd = os.memfd_create("copy")
        with open("/usr/bin/python3", "rb") as source:
            shutil.copyfileobj(source, open(fd, "wb", closefd=False))
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.dup2(write, 1)
            probe = "import socket\\ntry:\\n    socket.socket(); print('created')\\nexcept OSError as e: print(e.errno)"
            os.execv(f"/proc/self/fd/{fd}", ["python3", "-c", probe])
        os.close(write)
        os.waitpid(pid, 0)
        print(json.dumps({"raw": raw, "memfd_exec": os.read(read, 100).decode().strip()}))
    """,
    )
    assert facts["raw"] in ("EAFNOSUPPORT", "EPERM")
    assert facts["memfd_exec"] in {str(e) for e in REFUSED[tier]}


def test_the_user_is_unprivileged_and_stays_so(engine: SyncEngine) -> None:
    facts = probe(
        engine,
        syscalls=True,
        code="""
        import os
        print(json.dumps({"uid": os.getuid(), "setuid0": call(105, 0), "setgid0": call(106, 0),
                          "capset": call(126, 0, 0)}))
    """,
    )
    assert facts["uid"] not in (0, 65534)  # a uid of this container's own (test_white_box.py)
    assert facts["setuid0"] == "EPERM" and facts["setgid0"] == "EPERM"


# -- cross-submission leakage ------------------------------------------------------------------------------

WRITER = """
import os, socket, time, json
marker = "airlock-leak-" + str(os.getpid())
for path in ("/tmp/leak", "/dev/shm/leak", os.path.expanduser("~/leak")):
    try:
        open(path, "w").write(marker)
    except OSError:
        pass
os.environ["AIRLOCK_LEAK"] = marker
listener = socket.socket(socket.AF_UNIX)
listener.bind("\\0airlock-leak")
listener.listen(1)
time.sleep(float(input() or 0))
print("written")
"""
READER = """
import glob, json, os, socket, time
time.sleep(float(input() or 0))
found = [p for p in ("/tmp/leak", "/dev/shm/leak", os.path.expanduser("~/leak")) if os.path.exists(p)]
found += glob.glob("/tmp/**/leak", recursive=True)
if "AIRLOCK_LEAK" in os.environ:
    found.append("env")
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\\0airlock-leak")
    found.append("abstract socket")
except OSError:
    pass
mine = {1, os.getpid(), os.getppid()}
found += [f"pid {p}" for p in filter(str.isdigit, os.listdir("/proc")) if int(p) not in mine
          and os.path.exists(f"/proc/{p}/cmdline") and b"sleep" in open(f"/proc/{p}/cmdline", "rb").read()]
print(json.dumps(found))
"""


def test_nothing_leaks_to_the_next_submission(engine: SyncEngine) -> None:
    assert engine.run(WRITER, stdin="0").stdout == "written\n"
    assert json.loads(engine.run(READER, stdin="0").stdout) == []


def test_nothing_leaks_between_concurrent_submissions(engine: SyncEngine) -> None:
    writer = Submission(id="writer", code=WRITER, tests=[StdinTest(input="4", expected_output="written")])
    reader = Submission(id="reader", code=READER, tests=[StdinTest(input="2", expected_output="[]")])
    results = engine.judge_many([writer, reader])
    assert [r.ok for r in results] == [True, True], [r.tests[0].stdout for r in results]


def test_nothing_leaks_between_tests_of_one_submission(engine: SyncEngine) -> None:
    code = (
        "import sys\nif input() == 'write':\n"
        + textwrap.indent(WRITER.replace("input()", "'0'"), "    ")
        + "else:\n"
        + textwrap.indent(READER.replace("input()", "'0'"), "    ")
    )
    # Tests that share a process share its memory, the environment with it; nothing else.
    left = "[]" if engine.settings.process_per_test else '["env"]'
    submission = Submission(
        code=code,
        tests=[StdinTest(input="write", expected_output="written"), StdinTest(input="read", expected_output=left)],
    )
    result = engine.judge(submission)
    assert [t.verdict.value for t in result.tests] == ["passed", "passed"], [t.stdout for t in result.tests]


def test_the_host_environment_does_not_reach_the_sandbox(engine: SyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    facts = probe(engine, "import json, os\nprint(json.dumps(dict(os.environ)))\n")
    assert not any(key.startswith(("AWS", "GITHUB", "DOCKER", "SSH", "AIRLOCK")) for key in facts)
    assert set(facts) <= {
        "PATH",
        "LANG",
        "LC_ALL",
        "HOME",
        "TMPDIR",
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "HOSTNAME",
        "LC_CTYPE",
    }
