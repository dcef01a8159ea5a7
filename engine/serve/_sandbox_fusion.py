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
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._errors import EngineError
from .._models import Language, Outcome, RunResult
from ._requests import BadRequest, parse, request_limits, unbuilt_stderr
from ._state import state_of

__all__ = ["sandbox_fusion_routes"]

# SandboxFusion's language names (and ours, for clients that send them).
LANGUAGES: dict[str, Language] = {
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
    language: str
    stdin: str | None = None
    compile_timeout: float = Field(10, gt=0, le=3600, description="seconds")
    run_timeout: float = Field(10, gt=0, le=3600, description="seconds")
    memory_limit_MB: int = Field(-1, le=65536, description="-1 (or any number below 1): the server's limit")
    files: dict[str, str | None] = Field(default_factory=dict, description="not supported: must be empty")
    fetch_files: list[str] = Field(default_factory=list, description="not supported: must be empty")


StageStatus = Literal["Finished", "TimeLimitExceeded", "Error"]


def _stage(
    status: StageStatus,
    *,
    return_code: int | None = None,
    stdout: str = "",
    stderr: str = "",
    execution_time: float | None = None,
) -> dict[str, Any]:
    return {
        "status": status,
        "execution_time": execution_time,
        "return_code": return_code,
        "stdout": stdout,
        "stderr": stderr,
    }


def _response(status: str, message: str = "", **stages: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "status": status,
        "message": message,
        "compile_result": stages.get("compile_result"),
        "run_result": stages.get("run_result"),
        "executor_pod_name": None,
        "files": {},
    }


def _answer(language: Language, result: RunResult) -> dict[str, Any]:
    compiled = language in COMPILED
    if result.outcome is Outcome.SANDBOX_ERROR:
        return _response("SandboxError", result.error.message if result.error else "the sandbox failed")
    if result.outcome is Outcome.COMPILE_ERROR and not compiled:
        return _response("Failed", run_result=_stage("Finished", return_code=1, stderr=unbuilt_stderr(result)))
    if result.outcome is Outcome.COMPILE_ERROR:
        error = result.error
        if error is not None and error.type == "CompileTimeout":
            stage = _stage("TimeLimitExceeded", stderr=error.message)
        else:
            stage = _stage("Finished", return_code=1, stderr=error.message if error else "")
        return _response("Failed", compile_result=stage)
    compile_stage = _stage("Finished", return_code=0) if compiled else None
    if result.outcome is Outcome.TIMEOUT:
        status: StageStatus = "TimeLimitExceeded"
        return_code = None
    elif result.outcome in (Outcome.MEMORY_LIMIT, Outcome.OUTPUT_LIMIT):
        status, return_code = "Finished", KILLED
    elif result.signal is not None:
        status, return_code = "Finished", -result.signal
    else:
        status, return_code = "Finished", result.exit_code
    run = _stage(
        status,
        return_code=return_code,
        stdout=result.stdout,
        stderr=result.stderr,
        execution_time=result.usage.wall_time_s,
    )
    verdict = "Success" if result.outcome is Outcome.OK else "Failed"
    return _response(verdict, compile_result=compile_stage, run_result=run)


def _refusal(message: str) -> Response:
    # FastAPI's shape for a request it cannot validate, with the message first-hand.
    return JSONResponse({"detail": message, "message": message}, status_code=422)


async def run_code(request: Request) -> Response:
    state = state_of(request)
    try:
        body = parse(RunCodeRequest, await request.body())
        if body.files or body.fetch_files:
            raise BadRequest("files, fetch_files: a run here starts with no files and returns none; send both empty")
        language = LANGUAGES.get(body.language)
        if language is None:
            names = ", ".join(sorted(LANGUAGES))
            raise BadRequest(f"language: {body.language!r} is not served here; the languages are {names}")
        memory_mb = body.memory_limit_MB if body.memory_limit_MB > 0 else None
        limits = request_limits(
            state.options.limits, run_s=body.run_timeout, compile_s=body.compile_timeout, memory_mb=memory_mb
        )
    except BadRequest as exc:
        return _refusal(str(exc))
    try:
        result = await state.engine.run(body.code, stdin=body.stdin or "", language=language, limits=limits)
    except EngineError as exc:
        return JSONResponse(_response("SandboxError", str(exc)))
    return JSONResponse(_answer(language, result))


def sandbox_fusion_routes() -> list[Route]:
    return [Route("/run_code", run_code, methods=["POST"])]
