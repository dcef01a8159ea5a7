"""The writable places are exactly the documented ones, on every sandbox kind, for jobs and for
long-lived sandboxes alike: a program walks every mount it can see and tries to write
everywhere; anything it can write outside the scratch file systems fails the test.

A place a program can write outside those is state that can cross from one test to the next (the
harness empties only the scratch places between tests) and a crack in the read-only root: crun
once mounted ``/sys/fs/cgroup`` as a tmpfs of mode 1777, and every runtime mounts
``/dev/mqueue`` writable. A new runtime, tier or mount must not bring one back silently.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from templates import CARELESS

from engine import Limits, RuntimeUnavailable, SandboxError, StdinTest, Submission, SyncEngine, TerminalSize, Verdict
from engine._languages import TOOLCHAINS

pytestmark = pytest.mark.docker

# SECURITY.md ("What a program can write") lists these.
JOB_PLACES = ("/tmp", "/dev/shm")
SESSION_PLACES = (*JOB_PLACES, "/home/user", "/code")
# Where the walk's volume is mounted, when it has one.
VOLUME_PLACE = "/mnt/volume"
# Device nodes that keep no state a later test could read: null, zero, full, random, urandom,
# tty and the pseudo-terminal multiplexer (a terminal it opens dies with the process that holds it).
STATELESS_DEVICES = {(1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 2)}
# gVisor's own /dev/fuse and /dev/net/tun, backed by no host device: using either needs a
# capability (mount, TUNSETIFF) the program lacks.
GVISOR_DEVICES = {(10, 229), (10, 200)}
# A command's own pseudo-terminal (/dev/pts/N): what is written there goes to whoever holds the
# terminal's other side, the server, and the terminal dies with its last holder.
PTY_SLAVE_MAJORS = range(136, 144)
OVERFLOW_UID = 65534
# Mounted read-write by every runtime, writable by root alone.
RW_MOUNTS_NOT_WRITABLE = ("/proc", "/dev", "/dev/pts")

# Runs as the program: every directory it can create a file in, every other file it may open for
# writing (per-process files under /proc/<pid> excepted: they die with the process), and the
# mounts that are read-write where they are visible (the last one mounted on a path).
# A regular file on a read-only mount cannot be opened for writing, so it is not asked about
# unless it is itself a mount point; each of its directories is still tried, so a mount that
# calls itself read-only and is not shows up anyway. gVisor's statvfs has no ST_RDONLY, hence the
# mount table too. Asking about the image's 60,000 files took 14 s a walk under gVisor.
WALKER = r"""
import json, os, stat
probe = ".airlock-writable-probe-%d" % os.getpid()
mount_options = {}
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    mount_options[fields[4]] = fields[5].split(",")
mount_points = set(mount_options)
def mounted_read_only(folder):
    where = max((m for m in mount_points if folder == m or folder.startswith(m.rstrip("/") + "/")), key=len)
    try:
        flagged = os.statvfs(folder).f_flag & os.ST_RDONLY
    except OSError:
        flagged = False
    return flagged or "ro" in mount_options[where]
found, stack, seen = [], ["/"], set()
while stack:
    folder = stack.pop()
    read_only = mounted_read_only(folder)
    try:
        fd = os.open(os.path.join(folder, probe), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
        os.unlink(os.path.join(folder, probe))
        found.append(["dir", folder])
    except OSError:
        pass
    try:
        entries = list(os.scandir(folder))
    except OSError:
        continue
    for entry in entries:
        if folder == "/proc" and (entry.name.isdigit() or entry.name in ("self", "thread-self")):
            continue
        try:
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                if (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    stack.append(entry.path)
                continue
            if read_only and entry.is_file(follow_symlinks=False) and entry.path not in mount_points:
                continue
            if os.access(entry.path, os.W_OK):
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISCHR(info.st_mode):
                    found.append(["device", entry.path, os.major(info.st_rdev), os.minor(info.st_rdev)])
                else:
                    found.append(["file", entry.path])
        except OSError:
            continue
visible = {}
for line in open("/proc/self/mounts"):
    _, where, _, options = line.split()[:4]
    visible[where] = "rw" in options.split(",")
print(json.dumps({"writable": found, "rw_mounts": sorted(m for m, rw in visible.items() if rw)}))
"""


def _under(path: str, places: tuple[str, ...]) -> bool:
    return any(path == place or path.startswith(place + "/") for place in places)


def violations(report: dict[str, Any], places: tuple[str, ...], tier: str = "runc") -> list[Any]:
    """What the walker could write, or found mounted read-write, outside ``places``."""
    harmless = STATELESS_DEVICES | (GVISOR_DEVICES if tier == "gvisor" else set())
    wrong: list[Any] = []
    for kind, path, *device in report["writable"]:
        if kind == "device" and tuple(device) in harmless:
            continue
        if not _under(path, places):
            wrong.append([kind, path, *device])
    devices = {path for kind, path, *_ in report["writable"] if kind == "device"}
    for mount in report["rw_mounts"]:
        if not (_under(mount, places) or mount in RW_MOUNTS_NOT_WRITABLE or mount in devices):
            wrong.append(["rw mount", mount])
    return wrong


def test_a_job_can_write_only_its_scratch_places(engine: SyncEngine, tier: str) -> None:
    result = engine.run(WALKER, limits=Limits(wall_time_s=60, output_bytes=16 << 20))
    assert result.ok, result
    report = json.loads(result.stdout)
    assert ["dir", "/tmp"] in report["writable"] and ["dir", "/dev/shm"] in report["writable"]
    assert violations(report, JOB_PLACES, tier) == []


# A sandbox resumed from disk, or made from a snapshot, is a new container with another one's files
# unpacked into it by its own most privileged user: walked as that user, after planting what an
# unpacking could misuse.
PLANTED = "cp /bin/sh ~/sh && chmod 6755 ~/sh && mkfifo /tmp/fifo && ln -s / ~/root-link && ln -s /proc/1/root ~/init"


@pytest.mark.parametrize("user", ["user", "root", "resumed from disk", "made from a snapshot", "with a volume"])
def test_a_session_can_write_only_its_scratch_places(engine: SyncEngine, tier: str, user: str) -> None:
    """Walked from a command on a terminal, which sees all a plain command sees and its terminal;
    by the sandbox's root too where it has one (test_sandbox_root.py), whose capabilities reach
    all that its user namespace holds. With a volume mounted, the volume is one place more."""
    places: tuple[str, ...] = SESSION_PLACES
    volumes: dict[str, str] = {}
    if user == "with a volume":
        places, volumes = (*SESSION_PLACES, VOLUME_PLACE), {VOLUME_PLACE: engine.volumes.create("walked").id}
    try:
        sandbox = engine.create_sandbox(
            limits=Limits(wall_time_s=60, output_bytes=16 << 20), timeout_s=120, volumes=volumes
        )
    except RuntimeUnavailable as exc:
        pytest.skip(str(exc))
    except SandboxError as exc:
        assert tier == "gvisor" and "not offered on the gVisor tier" in str(exc)
        return
    finally:
        for volume_id in volumes.values():
            if not engine.sandboxes.using_volume(volume_id):
                engine.volumes.delete(volume_id)
    if user == "with a volume":
        user = sandbox.users[-1]
    if user in ("resumed from disk", "made from a snapshot"):
        how, user = user, sandbox.users[-1]
        assert sandbox.exec(["sh", "-c", PLANTED], user=user).exit_code == 0
        if how == "resumed from disk":
            assert engine.sandboxes.pause(sandbox.id, keep_memory=False) is True
            assert engine.sandboxes.resume(sandbox.id) is True
        else:
            taken = engine.sandboxes.snapshot(sandbox.id)
            engine.sandboxes.kill(sandbox.id)
            sandbox = engine.create_sandbox(snapshot=taken.id, limits=Limits(wall_time_s=60, output_bytes=16 << 20))
            engine.sandboxes.delete_snapshot(taken.id)
        assert sandbox.exec(["sh", "-c", "[ -u ~/sh ] && [ -p /tmp/fifo ] && [ -L ~/init ]"], user=user).exit_code == 0
    if user not in sandbox.users:
        engine.sandboxes.kill(sandbox.id)
        pytest.skip(f"no {user} in a sandbox here: {sandbox.users}")
    try:
        walk = ["sh", "-c", '[ -t 0 ] && echo on-a-terminal; python3 -c "$0" > /home/user/walked.json', WALKER]
        walker = sandbox.start(walk, time_s=60, terminal=TerminalSize(rows=24, cols=80), user=user)
        shown = b"".join(output.data for output in walker.output())
        ended = walker.wait()
        report = json.loads(sandbox.read_file("/home/user/walked.json", user=user))
    finally:
        engine.sandboxes.kill(sandbox.id)
        for volume_id in volumes.values():
            engine.volumes.delete(volume_id)
    assert ended.exit_code == 0 and b"on-a-terminal" in shown, (ended, shown)
    assert ["dir", "/home/user"] in report["writable"] and ["dir", "/code"] in report["writable"]
    assert (["dir", VOLUME_PLACE] in report["writable"]) == bool(volumes)
    terminals = [entry for entry in report["writable"] if entry[0] == "device" and entry[2] in PTY_SLAVE_MAJORS]
    # Under gVisor the terminal is the host's, passed in as a descriptor: no device node at all.
    assert bool(terminals) == (tier == "runc"), terminals
    assert violations(report, places, tier) == terminals


def test_every_template_can_write_only_its_scratch_places(language_images: None) -> None:
    """Every language image is a sandbox template. What an image can add is files and modes,
    the same under every runtime (the runtimes' mounts are checked above on one image)."""
    images = {chain.image: chain.language for chain in TOOLCHAINS}
    wrong = {}
    with SyncEngine() as engine:
        for image, language in images.items():
            sandbox = engine.create_sandbox(
                language=language, limits=Limits(wall_time_s=60, output_bytes=16 << 20), timeout_s=120
            )
            try:
                result = sandbox.exec(["python3", "-c", WALKER], time_s=60)
            finally:
                engine.sandboxes.kill(sandbox.id)
            assert result.exit_code == 0, (image, result)
            wrong[image] = violations(json.loads(result.stdout), SESSION_PLACES, engine.settings.isolation)
    assert wrong == {image: [] for image in images}


def test_an_operators_template_can_write_only_its_scratch_places(engine: SyncEngine, operator_template: str) -> None:
    """A template's recipe brings files and packages of its own, here a setuid file, a
    world-writable one and sudo: none may become a program's way up or a place to leave state in."""
    try:
        sandbox = engine.create_sandbox(
            template=operator_template, limits=Limits(wall_time_s=60, output_bytes=16 << 20), timeout_s=120
        )
    except RuntimeUnavailable as exc:
        pytest.skip(str(exc))
    # Python's stat: coreutils' statx is EINVAL under the gVisor Debian ships, whatever the sandbox.
    show_modes = (
        f"import os; print([(oct(os.stat(p).st_mode & 0o7777), os.stat(p).st_uid) for p in {list(CARELESS)!r}],"
        " [p for p in ('/usr/bin/sudo', '/usr/bin/sudoedit') if os.stat(p).st_mode & 0o6000])"
    )
    # The host's root; in a sandbox with a user namespace of its own, which does not map it, the
    # kernel's overflow uid.
    root = OVERFLOW_UID if "root" in sandbox.users else 0
    try:
        walked = sandbox.exec(["python3", "-c", WALKER], time_s=60)
        modes = sandbox.exec(["python3", "-c", show_modes], time_s=30)
    finally:
        engine.sandboxes.kill(sandbox.id)
    assert walked.exit_code == 0, walked
    assert violations(json.loads(walked.stdout), SESSION_PLACES, engine.settings.isolation) == []
    assert modes.stdout == f"[('0o755', {root}), ('0o644', {root})] []\n", modes  # and sudo is setuid no more


def test_the_invariant_catches_what_crun_once_mounted() -> None:
    before = {
        "writable": [["dir", "/tmp"], ["dir", "/sys/fs/cgroup"], ["dir", "/dev/mqueue"], ["device", "/dev/null", 1, 3]],
        "rw_mounts": ["/tmp", "/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/dev/mqueue", "/proc"],
    }
    assert violations(before, JOB_PLACES) == [
        ["dir", "/sys/fs/cgroup"],
        ["dir", "/dev/mqueue"],
        ["rw mount", "/sys/fs/cgroup"],
        ["rw mount", "/sys/fs/cgroup/memory"],
        ["rw mount", "/dev/mqueue"],
    ]


# Test 0 leaves a mark in each place a runtime once mounted writable; test 1 looks for it.
CROSSING_PLACES = ("/dev/mqueue/mark", "/sys/fs/cgroup/mark")
CROSSING_PROGRAMS = {
    "python": f"""
import os
places = {CROSSING_PLACES!r}
found = [p for p in places if os.path.exists(p)]
for place in places:
    try:
        os.close(os.open(place, os.O_CREAT | os.O_WRONLY, 0o644))
    except OSError:
        pass
print("found" if found else "none")
""",
    "c": """
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    const char *places[] = {PLACES};
    int found = 0;
    for (int i = 0; i < 2; i++) found |= access(places[i], F_OK) == 0;
    for (int i = 0; i < 2; i++) { int fd = open(places[i], O_CREAT | O_WRONLY, 0644); if (fd >= 0) close(fd); }
    puts(found ? "found" : "none");
    return 0;
}
""".replace("PLACES", ", ".join(f'"{place}"' for place in CROSSING_PLACES)),
}


@pytest.mark.parametrize("language", sorted(CROSSING_PROGRAMS))
def test_no_test_leaves_a_mark_the_next_can_read(engine: SyncEngine, language: str, language_images: None) -> None:
    tests = [StdinTest(input="", expected_output="none\n")] * 2
    submission = Submission(language=language, code=CROSSING_PROGRAMS[language], tests=tests)
    result = engine.judge(submission)
    assert [test.verdict for test in result.tests] == [Verdict.PASSED, Verdict.PASSED], result.tests
