"""What the stateless dialects (Piston, SandboxFusion) share: reading a request body into its
model with an error that names the field, and turning the limits a request asks for into the
server's ``Limits``."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .._limits import Limits
from .._models import RunResult

__all__ = ["BadRequest", "parse", "request_limits", "unbuilt_stderr", "validate"]

Model = TypeVar("Model", bound=BaseModel)


class BadRequest(ValueError):
    """A request the dialect cannot run; the message names the field at fault."""


def _named(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "body"
    return f"{where}: {first['msg']}"


def parse(model: type[Model], body: bytes) -> Model:
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise BadRequest(_named(exc)) from None


def validate(model: type[Model], document: Any) -> Model:
    """``parse`` for a body already read as JSON."""
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise BadRequest(_named(exc)) from None


def request_limits(base: Limits, *, run_s: float, compile_s: float, memory_mb: int | None) -> Limits:
    """``base`` with a request's times, and its memory when it names one (raised to what the
    scratch file systems need: they live in the container's memory)."""
    update: dict[str, Any] = {"wall_time_s": run_s, "compile_time_s": compile_s}
    if memory_mb is not None:
        update["memory_mb"] = max(base.tmpfs_mb + base.shm_mb + 32, memory_mb)
    try:
        return Limits.model_validate({**base.model_dump(), **update})
    except ValidationError as exc:
        raise BadRequest(f"the limits asked for cannot be given: {_named(exc)}") from None


def unbuilt_stderr(result: RunResult) -> str:
    """What a program that could not be compiled or loaded printed, for a dialect that runs its
    language without a compile stage (Python's syntax errors): the run's standard error."""
    error = result.error
    if error is None:
        return result.stderr
    return error.traceback or f"{error.type}: {error.message}"
