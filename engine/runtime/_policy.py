"""The isolation policy: everything about a container but its image, in one frozen model.

Built from the limits, the isolation tier and the container's purpose; each runtime only
translates it (``runtime/_docker.py`` into Docker's container config, ``runtime/_oci.py`` into
an OCI ``config.json``), and ``tests/unit/test_policy.py`` proves that both look at every field.

What never varies is not a field, because nothing may turn it on: no network (only ``lo``), our
seccomp profile (a long-lived sandbox's lets its programs serve on that ``lo``),
``no_new_privileges``, all capabilities dropped (but those a gVisor harness needs, below),
private IPC and cgroup namespaces, no device, no logs kept, the host's ``/proc`` and ``/sys``
facts masked.
"""

from __future__ import annotations

import enum
import functools

from pydantic import BaseModel, ConfigDict, Field

from .._limits import MIB, Limits, scratch_inodes
from .._settings import Isolation
from ._volumes import VolumeBind

__all__ = [
    "READONLY_PATHS",
    "SANDBOX_HOME",
    "SANDBOX_ROOT",
    "SANDBOX_USER",
    "SANDBOX_USER_HOME",
    "Policy",
    "Purpose",
    "Scratch",
    "policy_for",
]

# The writable place every container has, a job's HOME and working directory.
SANDBOX_HOME = "/tmp"
# A long-lived sandbox's user, by the name and home E2B's sandboxes give it (its uid is the
# container's own, as for a job), and a second writable place there.
SANDBOX_USER = "user"
# Its root, where the runtime gives the sandbox a user namespace of its own (ContainerRef.root_uid).
SANDBOX_ROOT = "root"
SANDBOX_USER_HOME = "/home/user"
# A sandbox's user owns its home and /code: E2B's root file system is writable, ours is not, and
# /code is where E2B's examples and reward-kit's E2B reward put a program.
SANDBOX_USER_PLACES = (SANDBOX_USER_HOME, "/code")
# Every file system a sandbox can write: all in its memory, they are what it has for a disk.
SANDBOX_SCRATCH_PLACES = (*SANDBOX_USER_PLACES, "/tmp", "/dev/shm")
HOSTNAME = "sandbox"
# Under gVisor the harness starts as (gVisor's own, not the host's) root with just what it needs
# to run the program as the container's uid, kill it, and clean up the files it leaves: that uid
# split keeps the program away from the harness where Debian's gVisor does not honour "not
# dumpable" or init's signal protection.
GVISOR_HARNESS_CAPABILITIES = ("SETUID", "SETGID", "KILL", "CHOWN", "DAC_OVERRIDE", "FOWNER")
# gVisor's kernel runs as host threads inside the container's pids cgroup.
GVISOR_PIDS_ALLOWANCE = 512
# Made read-only over whatever the runtime mounted there: Docker's defaults (the kernel's knobs in
# /proc), /proc/pressure (every user may write a trigger there, which sets the host's kernel to
# work for the container), and two places a runtime mounts writable though no one may write there:
# crun puts the cgroup v1 controllers under a tmpfs of mode 1777 at /sys/fs/cgroup, and every
# runtime mounts /dev/mqueue, where open(O_CREAT) makes a message queue that outlives the test
# that made it (our seccomp profile refuses only the mq_* calls). The writable places are the scratch file
# systems alone; tests/security/test_writable_places.py walks every mount to hold that.
READONLY_PATHS = (
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/pressure",
    "/dev/mqueue",
    "/sys/fs/cgroup",
    # Remounting /sys/fs/cgroup read-only leaves crun's controller mounts under it writable
    # again: each one is named (a runtime skips the ones a host does not have).
    *(
        f"/sys/fs/cgroup/{controller}"
        for controller in (
            "blkio",
            "cpu",
            "cpuacct",
            "cpuset",
            "devices",
            "freezer",
            "hugetlb",
            "memory",
            "misc",
            "net_cls",
            "net_prio",
            "perf_event",
            "pids",
            "rdma",
            "systemd",
            "unified",
        )
    ),
)
# A long-lived sandbox's main process: it only waits, and an init reaps what commands leave.
IDLE_COMMAND = ("sleep", "infinity")


class Purpose(enum.StrEnum):
    """What a container is for."""

    JOB = "job"
    """One request to the harness (PID 1), then gone."""
    SANDBOX = "sandbox"
    """Long-lived: commands run in it and files move in and out; an init reaps."""


class Scratch(BaseModel):
    """A writable, size-bounded, RAM-backed file system (``nosuid,nodev``, and ``noexec`` unless
    ``executable``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    destination: str
    size_mb: int
    inodes: int
    owned: bool = Field(False, description="the container's user's own (mode 0700), not shared (mode 1777)")
    executable: bool = Field(False, description="programs may run from it (what a compiler built, a user's script)")


class Policy(BaseModel):
    """How one container is isolated and bounded. Build it with :meth:`for_purpose`: the purpose
    decides the command, the init and who the main process starts as."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    isolation: Isolation = "runc"
    command: tuple[str, ...] = Field((), description="replaces the image's entrypoint; empty: the harness")
    init: bool = Field(False, description="an init as PID 1 that reaps (sandboxes; a job's harness reaps itself)")
    harness_as_root: bool = Field(False, description="the main process starts as the sandbox's root (gVisor jobs)")
    capabilities: tuple[str, ...] = Field((), description="kept for the main process; every other is dropped")
    hostname: str = HOSTNAME
    workdir: str = SANDBOX_HOME
    environment: tuple[tuple[str, str], ...] = (("HOME", SANDBOX_HOME), ("TMPDIR", SANDBOX_HOME), ("LANG", "C.UTF-8"))
    read_only_root: bool = True
    scratch: tuple[Scratch, ...] = ()
    volumes: tuple[VolumeBind, ...] = Field((), description="volumes bound in read-write, each at its destination")
    loopback_sockets: bool = Field(
        False,
        description="TCP and UDP sockets (AF_INET, AF_INET6) on the container's own loopback, for a long-lived"
        " sandbox's servers; otherwise AF_UNIX alone",
    )
    memory_bytes: int = Field(description="RAM, swap included")
    cpus: float
    pids: int = Field(description="processes plus threads in the pids cgroup")
    processes_per_user: int | None = Field(None, description="RLIMIT_NPROC, where the runtime counts it per sandbox")
    open_files: int
    file_size_bytes: int

    @classmethod
    def for_purpose(
        cls, limits: Limits, isolation: Isolation, purpose: Purpose = Purpose.JOB, *, runs_builds: bool = False
    ) -> Policy:
        """The locked-down policy for ``purpose`` under ``limits`` and the ``isolation`` tier.

        ``runs_builds``: the job compiles its program and runs the build from ``/tmp``. Scratch
        space is otherwise ``noexec``, except in a long-lived sandbox, whose user runs what
        they write (as on any Linux box; they could already run any code through Python).
        """
        gvisor = isolation == "gvisor"
        executable = runs_builds or purpose is Purpose.SANDBOX
        harness_as_root = gvisor and purpose is Purpose.JOB
        home = SANDBOX_USER_HOME if purpose is Purpose.SANDBOX else SANDBOX_HOME
        return cls(
            isolation=isolation,
            command=IDLE_COMMAND if purpose is Purpose.SANDBOX else (),
            init=purpose is Purpose.SANDBOX,
            harness_as_root=harness_as_root,
            capabilities=GVISOR_HARNESS_CAPABILITIES if harness_as_root else (),
            workdir=home,
            environment=(("HOME", home), ("TMPDIR", SANDBOX_HOME), ("LANG", "C.UTF-8")),
            scratch=(
                *(
                    Scratch(
                        destination=place,
                        size_mb=limits.tmpfs_mb,
                        inodes=scratch_inodes(limits.tmpfs_mb),
                        owned=True,
                        executable=executable,
                    )
                    for place in (SANDBOX_USER_PLACES if purpose is Purpose.SANDBOX else ())
                ),
                Scratch(
                    destination="/tmp",
                    size_mb=limits.tmpfs_mb,
                    inodes=scratch_inodes(limits.tmpfs_mb),
                    executable=executable,
                ),
                Scratch(destination="/dev/shm", size_mb=limits.shm_mb, inodes=scratch_inodes(limits.shm_mb)),
            ),
            loopback_sockets=purpose is Purpose.SANDBOX,
            memory_bytes=limits.memory_mb * MIB,
            cpus=limits.cpus,
            pids=limits.pids + (GVISOR_PIDS_ALLOWANCE if gvisor else 0),
            # gVisor's processes are not host processes, so the pids cgroup cannot count them; its
            # kernel counts RLIMIT_NPROC per sandbox (under runc the count would span every
            # container of the uid).
            processes_per_user=limits.pids if gvisor else None,
            open_files=limits.open_files,
            file_size_bytes=limits.file_size_mb * MIB,
        )


@functools.lru_cache(maxsize=256)
def policy_for(limits: Limits, isolation: Isolation, purpose: Purpose, *, runs_builds: bool = False) -> Policy:
    """:meth:`Policy.for_purpose`, built once per combination (jobs ask for the same few)."""
    return Policy.for_purpose(limits, isolation, purpose, runs_builds=runs_builds)
