"""SandboxFusion's ``POST /run_code``, answered by the engine: verl's sandbox reward
(``sandbox_fusion.check_correctness``) and its multi-turn code tool change their URL and
nothing else. Each request is one program run in a fresh sandbox; nothing here but translation.

SandboxFusion's statuses: the response's ``status`` is ``Success`` when every stage finished
with return code 0, ``Failed`` when one did not (or ran out of time), ``SandboxError`` when the
sandbox itself failed; each stage's ``status`` is ``Finished``, ``TimeLimitExceeded`` or
``Error``. A program killed by a signal has that signal's negative number as its return code,
as Python's subprocess reports it there.
"""

from __future__ import annotations

import signal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._errors import EngineError
from .._models import Language, Outcome, RunResult
from ._requests import BadRequest, parse, request_limits, unbuilt_stderr
from ._state import state_of

__all__ = ["RunCodeRequest", "RunCodeResponse", "sandbox_fusion_routes"]

# SandboxFusion's language names (and ours, for clients that send them).
FusionLanguage = Literal["python", "cpp", "c", "nodejs", "javascript", "typescript", "go", "java", "rust"]
LANGUAGES: dict[FusionLanguage, Language] = {
    "python": "python",
    "cpp": "cpp",
    "c": "c",
    "nodejs": "javascript",
    "javascript": "javascript",
    "typescript": "typescript",
    "go": "go",
    "java": "java",
    "rust": "rust",
}
# The languages SandboxFusion compiles in a stage of its own; the others fail when run.
COMPILED: frozenset[Language] = frozenset({"c", "cpp", "go", "java", "rust"})
# What a killed run's return code is: the signal that killed it, negated.
KILLED = -int(signal.SIGKILL)


class RunCodeRequest(BaseModel):
    """SandboxFusion's ``RunCodeRequest``; unknown fields are ignored, as it does."""

    model_config = ConfigDict(extra="ignore")

    code: str
    language: FusionLanguage
    stdin: str | None = None
    compile_timeout: float = Field(10, gt=0, le=3600, description="seconds")
    run_timeout: float = Field(10, gt=0, le=3600, description="seconds")
    memory_limit_MB: int = Field(-1, le=65536, description="-1 (or any number below 1): the server's limit")
    files: dict[str, str | None] = Field(
        default_factory=dict, description="not supported: must be empty", json_schema_extra={"maxProperties": 0}
    )
    fetch_files: list[str] = Field(
        default_factory=list, description="not supported: must be empty", json_schema_extra={"maxItems": 0}
    )


class CommandRunResult(BaseModel):
    """One stage (compile or run), as SandboxFusion reports it."""

    status: Literal["Finished", "TimeLimitExceeded", "Error"]
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str = ""
    stderr: str = ""


class RunCodeResponse(BaseModel):
    """SandboxFusion's answer to ``/run_code``."""

    status: Literal["Success", "Failed", "SandboxError"]
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


def _answer(language: Language, result: RunResult) -> RunCodeResponse:
    compiled = language in COMPILED
    if result.outcome is Outcome.SANDBOX_ERROR:
        return RunCodeResponse(status="SandboxError", message=result.error.message if result.error else "")
    if result.outcome is Outcome.COMPILE_ERROR and not compiled:
        run = CommandRunResult(status="Finished", return_code=1, stderr=unbuilt_stderr(result))
        return RunCodeResponse(status="Failed", run_result=run)
    if result.outcome is Outcome.COMPILE_ERROR:
        error = result.error
        if error is not None and error.type == "CompileTimeout":
            stage = CommandRunResult(status="TimeLimitExceeded", stderr=error.message)
        else:
            stage = CommandRunResult(status="Finished", return_code=1, stderr=error.message if error else "")
        return RunCodeResponse(status="Failed", compile_result=stage)
    run = CommandRunResult(
        status="TimeLimitExceeded" if result.outcome is Outcome.TIMEOUT else "Finished",
        return_code=_return_code(result),
        stdout=result.stdout,
        stderr=result.stderr,
        execution_time=result.usage.wall_time_s,
    )
    return RunCodeResponse(
        status="Success" if result.outcome is Outcome.OK else "Failed",
        compile_result=CommandRunResult(status="Finished", return_code=0) if compiled else None,
        run_result=run,
    )


def _return_code(result: RunResult) -> int | None:
    if result.outcome is Outcome.TIMEOUT:
        return None
    if result.outcome in (Outcome.MEMORY_LIMIT, Outcome.OUTPUT_LIMIT):
        return KILLED
    return -result.signal if result.signal is not None else result.exit_code


def _refusal(message: str) -> Response:
    # FastAPI's shape for a request it cannot validate, with the message first-hand.
    return JSONResponse({"detail": message, "message": message}, status_code=422)


async def run_code(request: Request) -> Response:
    state = state_of(request)
    try:
        body = parse(RunCodeRequest, await request.body())
        if body.files or body.fetch_files:
            raise BadRequest("files, fetch_files: a run here starts with no files and returns none; send both empty")
        language = LANGUAGES[body.language]
        memory_mb = body.memory_limit_MB if body.memory_limit_MB > 0 else None
        limits = request_limits(
            state.options.limits, run_s=body.run_timeout, compile_s=body.compile_timeout, memory_mb=memory_mb
        )
    except BadRequest as exc:
        return _refusal(str(exc))
    try:
        result = await state.engine.run(body.code, stdin=body.stdin or "", language=language, limits=limits)
    except EngineError as exc:
        return JSONResponse(RunCodeResponse(status="SandboxError", message=str(exc)).model_dump())
    state.metrics.verdict("sandbox_fusion", result.outcome.value)
    return JSONResponse(_answer(language, result).model_dump())


def sandbox_fusion_routes() -> list[Route]:
    return [Route("/run_code", run_code, methods=["POST"])]
