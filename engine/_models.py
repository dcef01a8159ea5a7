"""Public result models for plain runs."""

from __future__ import annotations

import enum
import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict

__all__ = ["ErrorInfo", "Language", "Outcome", "RunResult", "SafeText", "Usage", "safe_text"]

Language = Literal["python", "c", "cpp", "java", "javascript", "typescript", "go", "rust"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def safe_text(text: str) -> str:
    """``text`` with every lone surrogate (which a program can put in an error message, a
    returned string or a data set's id, and which no UTF-8 writer accepts) replaced by U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def _safe_if_text(value: object) -> object:
    return safe_text(value) if isinstance(value, str) else value


# Text a result carries: always writable as UTF-8, whatever the program or the data set held.
# (Cleaned before validation: pydantic refuses a str that holds a lone surrogate.)
SafeText = Annotated[str, BeforeValidator(_safe_if_text)]


class Outcome(enum.StrEnum):
    """How a run ended."""

    OK = "ok"
    """The program exited with status 0."""
    RUNTIME_ERROR = "runtime_error"
    """It exited with another status or was killed by a signal."""
    COMPILE_ERROR = "compile_error"
    """It could not be compiled or loaded."""
    TIMEOUT = "timeout"
    """It used more than ``Limits.time_s`` of CPU time, or ran into the wall-clock backstop
    (``Limits.wall_time_s``: it slept or waited); ``error`` says which."""
    MEMORY_LIMIT = "memory_limit"
    """The kernel's OOM killer ended it at ``Limits.memory_mb``."""
    OUTPUT_LIMIT = "output_limit"
    """It wrote more than ``Limits.output_bytes`` to stdout or stderr."""
    SANDBOX_ERROR = "sandbox_error"
    """The sandbox failed around the program; see ``error``. Nothing is known about the program."""


class Usage(BaseModel):
    """What a run used, as the harness measured it (None where it could not)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    wall_time_s: float | None = None
    cpu_time_s: float | None = None
    peak_memory_kb: int | None = None


class ErrorInfo(BaseModel):
    """An error the program raised, or why the sandbox failed."""

    model_config = ConfigDict(frozen=True)

    type: SafeText
    message: SafeText
    traceback: SafeText = ""


class RunResult(BaseModel):
    """Everything observed about one plain run."""

    model_config = ConfigDict(frozen=True)

    outcome: Outcome
    exit_code: int | None = None
    signal: int | None = None
    stdout: SafeText = ""
    stderr: SafeText = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    usage: Usage = Usage()
    error: ErrorInfo | None = None

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK
