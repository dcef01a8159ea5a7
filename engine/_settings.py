"""Engine settings, read from ``AIRLOCK_*`` environment variables at entry points only."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["DEFAULT_MIRROR", "Isolation", "RuntimeName", "Settings", "default_paused_dir"]

Isolation = Literal["runc", "gvisor"]
RuntimeName = Literal["docker", "oci"]

DEFAULT_MIRROR = "http://deb.debian.org/debian"


def _default_concurrency() -> int:
    # Containers are mostly waiting on the daemon and the kernel; two per core keeps both busy.
    return max(2, 2 * (os.cpu_count() or 1))


def default_paused_dir() -> Path:
    """Where ``airlock serve`` keeps sandboxes paused to disk unless told otherwise."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "airlock" / "paused"


class Settings(BaseSettings):
    """Where the engine runs containers and from what it builds images.

    Every field can be set as an environment variable with the ``AIRLOCK_`` prefix, for
    example ``AIRLOCK_DEBIAN_MIRROR=http://mirror.local/debian``.
    """

    model_config = SettingsConfigDict(env_prefix="AIRLOCK_", frozen=True, extra="forbid")

    docker_host: str | None = Field(
        None, description="Docker daemon address; unset means DOCKER_HOST or the local socket"
    )
    debian_mirror: str = Field(DEFAULT_MIRROR, description="Debian mirror for building images")
    base_image: str | None = Field(None, description="existing local image to build on instead of debootstrap")
    max_concurrency: int = Field(
        default_factory=_default_concurrency, ge=1, le=1024, description="containers in flight at once"
    )
    pool_size: int | None = Field(
        None, ge=0, le=1024, description="containers kept started ahead of need; unset: max_concurrency, 0: none"
    )
    max_sandboxes: int = Field(64, ge=1, le=4096, description="long-lived sandboxes alive at once")
    max_paused_sandboxes: int = Field(
        1024, ge=0, le=65536, description="sandboxes paused to disk at once (their files kept, no container)"
    )
    max_snapshots: int = Field(
        1024, ge=0, le=65536, description="snapshots kept at once (each a sandbox's files, until deleted)"
    )
    max_volumes: int = Field(64, ge=0, le=65536, description="volumes kept at once (in paused_dir, until deleted)")
    volume_size_mb: int = Field(
        1024, ge=16, le=1024 * 1024, description="each new volume's size: a sparse file, its disk used as it fills"
    )
    paused_dir: Path | None = Field(
        None,
        description=(
            "where sandboxes paused to disk, and snapshots, keep their files, so that they outlive the engine;"
            " held by one process at a time (unset: neither, but airlock serve uses ~/.local/state/airlock/paused)"
        ),
    )
    retries: int = Field(5, ge=0, le=10, description="retries of a job whose sandbox failed (of its unreported tests)")
    runtime: RuntimeName = Field(
        "docker",
        description="docker: containers through the Docker daemon; oci: crun or runc directly (root, jobs only)",
    )
    oci_runtime: str | None = Field(
        None,
        min_length=1,
        description=(
            "the OCI runtime of the runc tier: for the oci runtime a binary (crun, runc or a path), for docker a "
            "runtime registered with dockerd (crun, runc); unset: crun where it can run, else runc"
        ),
    )
    process_per_test: bool = Field(
        False,
        description=(
            "Submission.process_per_test for submissions that do not choose, and for plain runs; false by default, "
            "as the unsafe references run a submission's tests"
        ),
    )
    isolation: Isolation = Field(
        "runc", description="runc: namespaces, cgroups and seccomp on the host kernel; gvisor: also gVisor's kernel"
    )
    sandbox_uid_first: int = Field(
        61000, ge=1000, le=2**31, description="first host uid of the range that containers run as, one uid each"
    )
    sandbox_uid_count: int = Field(
        4000, ge=16, le=65536, description="size of that range: at most this many containers on the host at once"
    )
