"""Resource limits: one frozen, validated model with the unit in every field name."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["DEFAULT_LIMITS", "Limits", "backstop_s", "scratch_inodes", "within"]

MIB = 1024 * 1024
# Files a scratch file system may hold per MiB of its size. Empty files cost no space, so
# without this bound a test could leave millions of them, and removing them between tests
# (which must finish before the next test starts) would take as long as the program likes.
INODES_PER_MIB = 256


def scratch_inodes(size_mb: int) -> int:
    """The number of files and directories a tmpfs of ``size_mb`` may hold."""
    return max(1024, size_mb * INODES_PER_MIB)


MAX_TIME_S = 3600


def _a_time(value: Any) -> float | None:
    """``value`` when it is a number of seconds (a positive number), else None."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def backstop_s(time_s: float) -> float:
    """The wall-clock backstop of a CPU-time limit: room for a program that is slowed by a busy
    machine (it gets half the CPU it would alone), not for one that sleeps."""
    return 2 * time_s + 1


class Limits(BaseModel):
    """What one submission may use. Defaults are safe for untrusted code.

    ``time_s``, ``wall_time_s`` and ``output_bytes`` apply to each test (or to the single run),
    ``compile_time_s`` to compiling (or, in Python, importing) the program once; the others
    apply to the submission's whole container. The tmpfs scratch space and
    ``/dev/shm`` are RAM and count against ``memory_mb``.

    The time limit is CPU time (``time_s``): the CPU seconds of everything a test runs, all its
    processes and threads, which a busy machine does not change; a test past it is a timeout.
    ``wall_time_s`` is a backstop for programs that sleep or block, by default ``2 x time_s + 1``
    (compiling gets the same backstop of ``compile_time_s``). Given ``wall_time_s`` alone (the
    meaning it had before CPU limits), ``time_s`` is the same: a wall-clock limit, as before.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    time_s: float = Field(10.0, gt=0, le=MAX_TIME_S, description="CPU seconds per test or run (all its processes)")
    wall_time_s: float = Field(
        backstop_s(10.0),
        gt=0,
        le=backstop_s(MAX_TIME_S),
        description="wall-clock backstop per test or run (2 x time_s + 1)",
    )
    compile_time_s: float = Field(
        10.0, gt=0, le=MAX_TIME_S, description="CPU seconds for compiling (or, in Python, importing) the program once"
    )
    memory_mb: int = Field(512, ge=32, le=65536, description="RAM for the container, swap included")
    cpus: float = Field(1.0, ge=0.05, le=64, description="CPU quota in cores")
    pids: int = Field(128, ge=16, le=4096, description="processes plus threads in the container")
    output_bytes: int = Field(MIB, ge=1, le=256 * MIB, description="stdout and stderr kept per stream and test")
    tmpfs_mb: int = Field(64, ge=1, le=16384, description="size of the writable /tmp")
    shm_mb: int = Field(16, ge=1, le=4096, description="size of /dev/shm")
    open_files: int = Field(256, ge=16, le=65536, description="file descriptors per process")
    file_size_mb: int = Field(64, ge=1, le=16384, description="largest file a process may write")

    @model_validator(mode="before")
    @classmethod
    def _derive_the_other_time(cls, data: Any) -> Any:
        if isinstance(data, dict):
            # Only from a value that is a time: a bad one is named as given.
            wall, cpu = _a_time(data.get("wall_time_s")), _a_time(data.get("time_s"))
            if "time_s" not in data and wall is not None:
                data = {**data, "time_s": min(wall, MAX_TIME_S)}
            elif "wall_time_s" not in data and cpu is not None:
                data = {**data, "wall_time_s": backstop_s(cpu)}
        return data

    @property
    def compile_wall_time_s(self) -> float:
        return backstop_s(self.compile_time_s)

    def with_time(self, time_s: float, compile_time_s: float | None = None) -> Limits:
        """These limits with ``time_s`` of CPU time per test (and ``compile_time_s`` to compile),
        each with its wall-clock backstop."""
        update: dict[str, float] = {"time_s": time_s, "wall_time_s": backstop_s(time_s)}
        if compile_time_s is not None:
            update["compile_time_s"] = compile_time_s
        return Limits.model_validate({**self.model_dump(), **update})

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
