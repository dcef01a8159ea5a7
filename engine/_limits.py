"""Resource limits: one frozen, validated model with the unit in every field name."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["DEFAULT_LIMITS", "Limits", "scratch_inodes", "within"]

MIB = 1024 * 1024
# Files a scratch file system may hold per MiB of its size. Empty files cost no space, so
# without this bound a test could leave millions of them, and removing them between tests
# (which must finish before the next test starts) would take as long as the program likes.
INODES_PER_MIB = 256


def scratch_inodes(size_mb: int) -> int:
    """The number of files and directories a tmpfs of ``size_mb`` may hold."""
    return max(1024, size_mb * INODES_PER_MIB)


class Limits(BaseModel):
    """What one submission may use. Defaults are safe for untrusted code.

    ``wall_time_s`` and ``output_bytes`` apply to each test (or to the single run),
    ``compile_time_s`` to compiling (or, in Python, importing) the program once; the others
    apply to the submission's whole container. The tmpfs scratch space and
    ``/dev/shm`` are RAM and count against ``memory_mb``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    wall_time_s: float = Field(10.0, gt=0, le=3600, description="wall-clock limit per test or run")
    compile_time_s: float = Field(
        10.0, gt=0, le=3600, description="wall-clock limit for compiling (or, in Python, importing) the program once"
    )
    memory_mb: int = Field(512, ge=32, le=65536, description="RAM for the container, swap included")
    cpus: float = Field(1.0, ge=0.05, le=64, description="CPU quota in cores")
    pids: int = Field(128, ge=16, le=4096, description="processes plus threads in the container")
    output_bytes: int = Field(MIB, ge=1, le=256 * MIB, description="stdout and stderr kept per stream and test")
    tmpfs_mb: int = Field(64, ge=1, le=16384, description="size of the writable /tmp")
    shm_mb: int = Field(16, ge=1, le=4096, description="size of /dev/shm")
    open_files: int = Field(256, ge=16, le=65536, description="file descriptors per process")
    file_size_mb: int = Field(64, ge=1, le=16384, description="largest file a process may write")

    @model_validator(mode="after")
    def _scratch_fits_in_memory(self) -> Limits:
        if self.tmpfs_mb + self.shm_mb >= self.memory_mb:
            raise ValueError(
                f"tmpfs_mb ({self.tmpfs_mb}) + shm_mb ({self.shm_mb}) must be below memory_mb "
                f"({self.memory_mb}): both are RAM charged to the container"
            )
        return self


DEFAULT_LIMITS = Limits()


def within(ceiling: Limits, asked: Limits) -> tuple[Limits, dict[str, float]]:
    """The limits a request gets when ``ceiling`` is the most it may have (a server's flags): each
    field ``asked`` sets, but never above the ceiling; the fields it leaves unset, the ceiling's.
    Also what was capped: each such field with the value asked. Every field is a quantity, more
    of which is more power; a request may only lower it.

    :raises ValueError: (a pydantic ``ValidationError``) the result is not a valid whole, as when
        the memory asked for is below the ceiling's scratch space.
    """
    values = ceiling.model_dump()
    capped: dict[str, float] = {}
    for name in sorted(asked.model_fields_set):
        value = getattr(asked, name)
        if value > values[name]:
            capped[name] = value
        else:
            values[name] = value
    return Limits.model_validate(values), capped
