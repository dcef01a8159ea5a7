"""Public result models for plain runs."""

from __future__ import annotations

import enum
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["ErrorInfo", "Language", "Outcome", "RunResult"]

Language = Literal["python"]


class Outcome(enum.StrEnum):
    """How a run ended."""

    OK = "ok"
    """The program exited with status 0."""
    RUNTIME_ERROR = "runtime_error"
    """It exited with another status or was killed by a signal."""
    COMPILE_ERROR = "compile_error"
    """It could not be compiled or loaded."""
    TIMEOUT = "timeout"
    """It ran past ``Limits.wall_time_s`` and was killed."""
    MEMORY_LIMIT = "memory_limit"
    """The kernel's OOM killer ended it at ``Limits.memory_mb``."""
    OUTPUT_LIMIT = "output_limit"
    """It wrote more than ``Limits.output_bytes`` to stdout or stderr."""
    SANDBOX_ERROR = "sandbox_error"
    """The sandbox failed around the program; see ``error``. Nothing is known about the program."""


class ErrorInfo(BaseModel):
    """An error the program raised, or why the sandbox failed."""

    model_config = ConfigDict(frozen=True)

    type: str
    message: str
    traceback: str = ""


class RunResult(BaseModel):
    """Everything observed about one plain run."""

    model_config = ConfigDict(frozen=True)

    outcome: Outcome
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_time_s: float = 0.0
    cpu_time_s: float | None = None
    peak_memory_kb: int | None = None
    error: ErrorInfo | None = None

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK
