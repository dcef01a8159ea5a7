"""A sandbox's root (E2B's ``user="root"``), where the runtime gives each sandbox a user namespace
of its own: the OCI runtime. Root is uid 0 there, mapped to a second unprivileged host uid leased
to that sandbox alone, with capabilities that reach only what the namespace holds. These attacks
are what someone who has read that would try: whatever root does, it must gain nothing on the
host, the network, another sandbox, or the sandbox's limits. The writable-places walk as root is
in test_writable_places.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from probes import DANGEROUS_SYSCALLS, SOCKET_FAMILIES, SYSCALL
from sandboxes import OCI_SANDBOXES, Sandbox, ids

from engine import Limits, SandboxError, SyncEngine, SyncSandbox

pytestmark = pytest.mark.docker

SMALL = Limits(memory_mb=128, pids=64, wall_time_s=10, tmpfs_mb=16)
SOCKETS_REFUSED = ("EAFNOSUPPORT", "EPERM", "EACCES", "EPROTONOSUPPORT")
# The families a sandbox's programs have for servers on its own loopback.
LOOPBACK = ("inet", "inet6")
# What root is given, by the kernel's numbers: the whole set, written here apart from the engine's
# list, so that a capability added there fails this test until it is attacked here.
CAPABILITY_NUMBERS = {
    "CAP_CHOWN": 0,
    "CAP_DAC_OVERRIDE": 1,
    "CAP_FOWNER": 3,
    "CAP_FSETID": 4,
    "CAP_KILL": 5,
    "CAP_SETGID": 6,
    "CAP_SETUID": 7,
    "CAP_NET_BIND_SERVICE": 10,
}


@pytest.fixture(scope="module", params=OCI_SANDBOXES, ids=ids(OCI_SANDBOXES))
def root_engine(request: pytest.FixtureRequest) -> Iterator[SyncEngine]:
    kind: Sandbox = request.param
    with SyncEngine(kind.require().settings()) as engine:
        yield engine


@pytest.fixture
def sandbox(root_engine: SyncEngine) -> Iterator[SyncSandbox]:
    made = root_engine.create_sandbox(limits=SMALL, timeout_s=120)
    yield made
    root_engine.sandboxes.kill(made.id)


def as_root(sandbox: SyncSandbox, code: str, time_s: float = 20) -> dict[str, Any]:
    result = sandbox.exec(["python3", "-c", SYSCALL + code], time_s=time_s, user="root")
    assert result.stdout, result.stderr
    facts: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return facts


def host_processes(uid: int) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid]


def test_root_exists_only_where_its_namespace_is_the_sandboxs_own(engine: SyncEngine, sandbox_kind: Sandbox) -> None:
    """Docker has user namespaces only daemon-wide (one root for every container): there a
    sandbox has no root, and asking for one is refused by name, before anything runs."""
    sandbox = engine.create_sandbox(limits=SMALL, timeout_s=60)
    try:
        if sandbox_kind.runtime == "oci":
            assert sandbox.users == ("user", "root")
            assert sandbox.exec(["id", "-u"], user="root").stdout == "0\n"
        else:
            assert sandbox.users == ("user",)
            with pytest.raises(SandboxError, match="oci runtime"):
                sandbox.exec(["id", "-u"], user="root")
        with pytest.raises(SandboxError, match="no user 'admin'"):
            sandbox.exec(["id", "-u"], user="admin")
    finally:
        engine.sandboxes.kill(sandbox.id)


def test_root_is_root_of_its_own_namespace_alone(sandbox: SyncSandbox) -> None:
    user_uid = int(sandbox.exec(["id", "-u"]).stdout)
    sandbox.write_file("private", b"the user's")
    sandbox.exec(["chmod", "600", "private"])
    sleeper = sandbox.start(["sleep", "600"])
    sleeper.start()
    facts = as_root(
        sandbox,
        f"""
import os, resource, socket, signal
def refused(fn):
    try:
        fn()
        return "allowed"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
def write(path):
    with open(path, "w") as f:
        f.write("x")
def raise_hard(limit):
    soft, hard = resource.getrlimit(limit)
    try:
        resource.setrlimit(limit, (soft, hard + 1))
    except ValueError:  # Python's word for EPERM here
        raise PermissionError(errno.EPERM, "raise") from None
def mount(source, target, kind, flags, options):
    if libc.mount(source, target, kind, ctypes.c_ulong(flags), options) != 0:
        raise OSError(ctypes.get_errno(), "mount")
def sockets():
    made = {{}}
    for name, (family, kind) in {SOCKET_FAMILIES!r}.items():
        made[name] = refused(lambda: socket.socket(family, kind).close())
    return made
status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
cgroup_files = [os.path.join(d, f) for d, _, fs in os.walk("/sys/fs/cgroup") for f in fs
                if f in ("pids.max", "memory.limit_in_bytes", "memory.max", "cpu.cfs_quota_us", "cgroup.procs")]
print(json.dumps({{
    "uid": os.getuid(),
    "uid_map": [line.split() for line in open("/proc/self/uid_map")],
    "gid_map": [line.split() for line in open("/proc/self/gid_map")],
    "status": {{k: status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")}},
    "syscalls": {{name: call(number, *args) for name, number, args in {DANGEROUS_SYSCALLS!r}}},
    "remount_root_rw": refused(lambda: mount(b"none", b"/", None, 32 | 4096, None)),
    "remount_scratch_larger": refused(lambda: mount(b"tmpfs", b"/home/user", None, 32, b"size=4g")),
    "mount_tmpfs": refused(lambda: mount(b"tmpfs", b"/home/user", b"tmpfs", 0, b"size=4g")),
    "sockets": sockets(),
    "inet": refused(lambda: socket.create_connection(("127.0.0.1", 2375), timeout=2)),
    "written": {{p: refused(lambda p=p: write(p)) for p in ("/etc/passwd", "/x", "/usr/bin/x", "/dev/x",
                 "/proc/sys/kernel/hostname", "/proc/sysrq-trigger", "/sys/kernel/uevent_helper",
                 *cgroup_files)}},
    "cgroup_files": len(cgroup_files),
    "cgroup_dir": refused(lambda: os.mkdir("/sys/fs/cgroup/pids/airlock-root")),
    "image_secret": refused(lambda: open("/etc/shadow").read()),
    "chmod_image": refused(lambda: os.chmod("/usr/bin/python3", 0o4777)),
    "sethostname": refused(lambda: socket.sethostname("elsewhere")),
    "mknod": refused(lambda: os.mknod("/home/user/disk", 0o600 | 0o060000, os.makedev(8, 0))),
    "rlimits": {{name: refused(lambda n=n: raise_hard(n)) for name, n in (("nofile", resource.RLIMIT_NOFILE),
                 ("fsize", resource.RLIMIT_FSIZE), ("core", resource.RLIMIT_CORE))}},
    "chown_unmapped": refused(lambda: os.chown("/home/user/private", 12345, 12345)),
    "kill_init": refused(lambda: os.kill(1, signal.SIGKILL)),
    "users_file": refused(lambda: open("/home/user/private").read()),
    "chown_users_file": refused(lambda: os.chown("/home/user/private", 0, 0)),
    "kill_users_process": refused(lambda: os.kill({sleeper.pid}, signal.SIGKILL)),
}}))
""",
    )
    # Root is an unprivileged host uid of the sandbox's own; nothing else of the host is mapped.
    assert facts["uid"] == 0
    root_line, user_line = sorted(facts["uid_map"], key=lambda line: int(line[0]))
    root_host_uid = int(root_line[1])
    assert root_line[0] == "0" and root_line[2] == "1" and root_host_uid not in (0, user_uid)
    assert user_line == [str(user_uid), str(user_uid), "1"] and facts["gid_map"] == facts["uid_map"]
    status = facts["status"]
    granted = sum(1 << number for number in CAPABILITY_NUMBERS.values())
    assert status == {
        "CapEff": f"{granted:016x}",
        "CapPrm": f"{granted:016x}",
        "CapBnd": f"{granted:016x}",
        "CapAmb": "0000000000000000",
        "NoNewPrivs": "1",
        "Seccomp": "2",
    }
    refused = ("EPERM", "ENOSYS", "EACCES", "EINVAL", "EFAULT", "EBADF", "ENOENT")
    syscalls = facts["syscalls"]
    assert isinstance(syscalls, dict) and len(syscalls) == len(DANGEROUS_SYSCALLS)
    assert {name: fact for name, fact in syscalls.items() if fact not in refused} == {}
    for mounting in ("remount_root_rw", "remount_scratch_larger", "mount_tmpfs"):
        assert facts[mounting] == "EPERM", mounting
    sockets = facts["sockets"]
    assert isinstance(sockets, dict) and set(sockets) == set(SOCKET_FAMILIES)
    # TCP and UDP on its own loopback (test_sandbox_loopback.py), and no other family, raw sockets
    # included (no CAP_NET_RAW).
    assert sockets["inet"] == sockets["inet6"] == "allowed"
    assert {name: fact for name, fact in sockets.items() if name not in LOOPBACK and fact not in SOCKETS_REFUSED} == {}
    assert facts["inet"] == "ECONNREFUSED"
    written = facts["written"]
    assert isinstance(written, dict) and facts["cgroup_files"]
    assert {path: fact for path, fact in written.items() if fact not in ("EROFS", "EACCES", "ENOENT")} == {}
    assert facts["cgroup_dir"] in ("EROFS", "EACCES", "ENOENT")
    # Capabilities reach nothing whose owner the namespace does not map: the image's files are
    # the host root's (and, read-only, nobody's to change).
    assert facts["image_secret"] == "EACCES"
    assert facts["chmod_image"] in ("EPERM", "EROFS")
    assert facts["sethostname"] == "EPERM" and facts["mknod"] == "EPERM"
    assert facts["rlimits"] == {"nofile": "EPERM", "fsize": "EPERM", "core": "EPERM"}
    assert facts["chown_unmapped"] == "EINVAL"
    # The init ignores what it does not handle, even from root: the sandbox runs on.
    assert facts["kill_init"] in ("allowed", "EPERM") and sandbox.exec(["echo", "alive"]).stdout == "alive\n"
    # What it is for: the user's files and processes are root's to manage.
    assert facts["users_file"] == "allowed" and facts["chown_users_file"] == "allowed"
    assert facts["kill_users_process"] == "allowed" and sleeper.wait().exit_code == 128 + 9

    # On the host, root's processes are that unprivileged uid's, and they end with the sandbox.
    as_host = sandbox.start(["sleep", "600"], user="root")
    as_host.start()
    assert [p.uids().effective for p in host_processes(root_host_uid)] != []
    assert {p.uids().effective for p in host_processes(root_host_uid)} == {root_host_uid}


def test_roots_processes_are_held_by_the_sandboxs_pids_and_die_with_it(
    root_engine: SyncEngine, sandbox: SyncSandbox
) -> None:
    """No rlimit bounds root's processes here (root of a user namespace could not raise one
    anyway): the pids cgroup does, for root as for the user."""
    root_host_uid = int(sandbox.exec(["cat", "/proc/self/uid_map"], user="root").stdout.split()[1])
    forks = (
        "import os, time\nmade = 0\nwhile True:\n    try:\n        pid = os.fork()\n    except OSError:\n"
        "        break\n    if pid == 0:\n        time.sleep(60)\n        os._exit(0)\n    made += 1\n"
        "print(made, flush=True)\nos.killpg(0, 9)"
    )
    made = sandbox.exec(["python3", "-c", forks], time_s=20, user="root")
    assert 0 < int(made.stdout) < SMALL.pids, made
    sandbox.exec(
        ["sh", "-c", "nohup setsid sh -c 'trap \"\" TERM HUP INT; while :; do sleep 1; done' >/dev/null 2>&1 &"],
        user="root",
    )
    assert host_processes(root_host_uid)
    root_engine.sandboxes.kill(sandbox.id)
    deadline = time.monotonic() + 10
    while host_processes(root_host_uid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not host_processes(root_host_uid)


def test_one_sandboxs_root_cannot_reach_another(root_engine: SyncEngine, sandbox: SyncSandbox) -> None:
    other = root_engine.create_sandbox(limits=SMALL, timeout_s=120)
    try:
        sandbox.write_file("secret.txt", b"mine", user="root")
        holder = sandbox.start(
            [
                "python3",
                "-c",
                "import socket, time\ns = socket.socket(socket.AF_UNIX)\n"
                "s.bind('\\0airlock-root-leak')\ns.listen(1)\nprint('bound', flush=True)\ntime.sleep(60)",
            ],
            user="root",
        )
        output = holder.output()
        assert next(output).data == b"bound\n"
        probe = """
import glob, os, socket
marker = ("airlock-root-" + "leak").encode()  # built here, so that this probe's own argv lacks it
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(b"\\0" + marker)
    reached = True
except OSError:
    reached = False
names = [open(f"/proc/{p}/cmdline", "rb").read() for p in os.listdir("/proc") if p.isdigit()]
print(json.dumps({"reached": reached, "files": glob.glob("/home/user/*") + glob.glob("/tmp/*"),
                  "their_process": any(marker in n for n in names),
                  "root": open("/proc/self/uid_map").read().split()[1]}))
"""
        mine, theirs = as_root(sandbox, probe), as_root(other, probe)
        assert {key: theirs[key] for key in ("reached", "files", "their_process")} == {
            "reached": False,
            "files": [],
            "their_process": False,
        }
        assert mine["root"] != theirs["root"]
        holder.signal()
    finally:
        root_engine.sandboxes.kill(other.id)
