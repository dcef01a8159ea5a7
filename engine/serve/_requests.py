"""What the stateless dialects (Piston, SandboxFusion) share: reading a request body into its
model with an error that names the field, and turning the limits a request asks for into the
server's ``Limits``."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, Strict, ValidationError

from .._limits import Limits, backstop_s, within
from .._models import RunResult

__all__ = [
    "CAPPED_HEADER",
    "BadRequest",
    "JsonFloat",
    "JsonInt",
    "capped_header",
    "parse",
    "request_limits",
    "unbuilt_stderr",
    "validate",
]

# Names the limits a request asked above the server's (each with the value asked): the server's
# flags are ceilings, which a request may only lower.
CAPPED_HEADER = "Airlock-Limits-Capped"

Model = TypeVar("Model", bound=BaseModel)


def _a_number(value: Any) -> Any:
    if isinstance(value, bool | str):
        raise ValueError("must be a number")  # pydantic's lax mode would take true for 1 and "3" for 3
    return value


# Numbers as JSON Schema reads them: 653.0 is an integer, true and "653" are not numbers. A strict
# float takes exactly JSON's numbers, and keeps its bounds in the schema even when optional.
JsonInt = Annotated[int, BeforeValidator(_a_number)]
JsonFloat = Annotated[float, Strict()]


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


def request_limits(
    ceiling: Limits, *, run_s: float, compile_s: float, memory_mb: int | None
) -> tuple[Limits, dict[str, float]]:
    """A request's times (CPU time, each with its wall-clock backstop: the dialects' timeouts are
    wall-clock time, which a busy machine stretches), and its memory when it names one (raised to
    what the scratch file systems need: they live in the container's memory), within the
    server's limits, which are ceilings; and what was capped (see ``within``)."""
    asked: dict[str, Any] = {"time_s": run_s, "wall_time_s": backstop_s(run_s), "compile_time_s": compile_s}
    if memory_mb is not None:
        asked["memory_mb"] = max(ceiling.tmpfs_mb + ceiling.shm_mb + 32, memory_mb)
    try:
        return within(ceiling, Limits.model_validate({**ceiling.model_dump(), **asked}))
    except ValidationError as exc:
        raise BadRequest(f"the limits asked for cannot be given: {_named(exc)}") from None


def capped_header(capped: dict[str, float]) -> dict[str, str]:
    """Tells the client which limits it asked for were lowered to the server's, and from what."""
    if not capped:
        return {}
    return {CAPPED_HEADER: ", ".join(f"{name}={value:g}" for name, value in capped.items())}


def unbuilt_stderr(result: RunResult) -> str:
    """What a program that could not be compiled or loaded printed, for a dialect that runs its
    language without a compile stage (Python's syntax errors): the run's standard error."""
    error = result.error
    if error is None:
        return result.stderr
    return error.traceback or f"{error.type}: {error.message}"
