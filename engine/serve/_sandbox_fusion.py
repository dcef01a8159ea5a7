"""SandboxFusion's ``POST /run_code`` and ``POST /run_jupyter``, answered by the engine: verl's
sandbox reward (``sandbox_fusion.check_correctness``) and its multi-turn code tool change their
URL and nothing else. Each request runs in a fresh sandbox (a job for ``run_code``, a session
with a kernel for ``run_jupyter``); nothing here but translation.

SandboxFusion's statuses: the response's ``status`` is ``Success`` when every stage finished
with return code 0, ``Failed`` when one did not (or ran out of time), ``SandboxError`` when the
sandbox itself failed; each stage's ``status`` is ``Finished``, ``TimeLimitExceeded`` or
``Error``. A program killed by a signal has that signal's negative number as its return code,
as Python's subprocess reports it there.
"""

from __future__ import annotations

import json
import signal
import time
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._errors import EngineError, SandboxLimitReached
from .._languages import TOOLCHAINS
from .._limits import Limits
from .._models import Language, Outcome, RunResult
from ..sandboxes._interpreter import CellError, CellResult, CellText
from ..sandboxes._sandbox import Sandbox
from ._admission import Dialect
from ._requests import BadRequest, JsonFloat, JsonInt, capped_header, parse, request_limits, unbuilt_stderr
from ._state import ServerState, state_of

__all__ = ["SANDBOX_FUSION", "RunCodeRequest", "RunCodeResponse", "RunJupyterRequest", "RunJupyterResponse"]

# SandboxFusion's language names (and ours, for clients that send them).
FusionLanguage = Literal["python", "cpp", "c", "nodejs", "javascript", "typescript", "go", "java", "rust"]
LANGUAGES: dict[str, Language] = {
    name: chain.language for chain in TOOLCHAINS for name in (*chain.names.sandbox_fusion, chain.language)
}
COMPILED: frozenset[Language] = frozenset(chain.language for chain in TOOLCHAINS if chain.compiles)
# A session's time to live past the request's total time: its removal, not its cells.
SANDBOX_SLACK_S = 60.0
# A Jupyter answer keeps this many times Limits.output_bytes of output in all.
ANSWER_OUTPUTS = 8
# What a killed run's return code is: the signal that killed it, negated.
KILLED = -int(signal.SIGKILL)


class RunCodeRequest(BaseModel):
    """SandboxFusion's ``RunCodeRequest``; unknown fields are ignored, as it does."""

    model_config = ConfigDict(extra="ignore")

    code: str
    language: FusionLanguage
    stdin: str | None = None
    compile_timeout: JsonFloat = Field(10, gt=0, le=3600, description="seconds")
    run_timeout: JsonFloat = Field(10, gt=0, le=3600, description="seconds")
    memory_limit_MB: JsonInt = Field(-1, le=65536, description="-1 (or any number below 1): the server's limit")
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


class RunJupyterRequest(BaseModel):
    """SandboxFusion's ``RunJupyterRequest``: cells run in order in one Python kernel."""

    model_config = ConfigDict(extra="ignore")

    cells: list[str] = Field(max_length=10_000)
    cell_timeout: JsonFloat = Field(0, ge=0, le=3600, description="seconds per cell; 0: only the total")
    total_timeout: JsonFloat = Field(45, gt=0, le=3600, description="seconds for every cell")
    memory_limit_MB: JsonInt = Field(-1, le=65536, description="-1 (or any number below 1): the server's limit")
    kernel: Literal["python3"] = "python3"
    files: dict[str, str] = Field(
        default_factory=dict, description="not supported: must be empty", json_schema_extra={"maxProperties": 0}
    )
    fetch_files: list[str] = Field(
        default_factory=list, description="not supported: must be empty", json_schema_extra={"maxItems": 0}
    )


class CellRunResult(BaseModel):
    """One cell: its streams, its MIME bundles (values and displays), its errors (Jupyter's
    ``ename``, ``evalue``, ``traceback``)."""

    stdout: str = ""
    stderr: str = ""
    display: list[dict[str, Any]] = Field(default_factory=list)
    error: list[dict[str, Any]] = Field(default_factory=list)


class RunJupyterResponse(BaseModel):
    """SandboxFusion's answer to ``/run_jupyter``: ``Failed`` with no cells when the cells ran
    past ``total_timeout``, as there."""

    status: Literal["Success", "Failed", "SandboxError"]
    message: str = ""
    driver: CommandRunResult | None = None
    cells: list[CellRunResult] = Field(default_factory=list)
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


def _limits(
    state: ServerState, body: RunCodeRequest | RunJupyterRequest, *, run_s: float, compile_s: float
) -> tuple[Limits, dict[str, float]]:
    """The request's limits within the server's (and what was capped), once it is known to ask
    for nothing unsupported."""
    if body.files or body.fetch_files:
        raise BadRequest("files, fetch_files: a run here starts with no files and returns none; send both empty")
    memory_mb = body.memory_limit_MB if body.memory_limit_MB > 0 else None
    return request_limits(state.options.limits, run_s=run_s, compile_s=compile_s, memory_mb=memory_mb)


def _capped_message(capped: dict[str, float], limits: Limits) -> str:
    if not capped:
        return ""
    lowered = ", ".join(f"{name} {value:g} to {getattr(limits, name):g}" for name, value in capped.items())
    return f"the server's limits are ceilings: lowered {lowered}"


async def run_code(request: Request) -> Response:
    state = state_of(request)
    try:
        body = parse(RunCodeRequest, await request.body())
        limits, capped = _limits(state, body, run_s=body.run_timeout, compile_s=body.compile_timeout)
        language = LANGUAGES[body.language]
    except BadRequest as exc:
        return _refusal(str(exc))
    headers = capped_header(capped)
    try:
        result = await state.engine.run(body.code, stdin=body.stdin or "", language=language, limits=limits)
    except EngineError as exc:
        return JSONResponse(RunCodeResponse(status="SandboxError", message=str(exc)).model_dump(), headers=headers)
    state.metrics.verdict("sandbox_fusion", result.outcome.value)
    answer = _answer(language, result)
    answer.message = answer.message or _capped_message(capped, limits)
    return JSONResponse(answer.model_dump(), headers=headers)


class _Kept:
    """What a Jupyter answer keeps of its cells' output, as a job keeps a test's: each stream of a
    cell to ``Limits.output_bytes``, and the whole answer to ``ANSWER_OUTPUTS`` times that.
    A display that does not fit whole is left out; text is cut."""

    def __init__(self, output_bytes: int) -> None:
        self.per_stream = output_bytes
        self.left = ANSWER_OUTPUTS * output_bytes
        self.cut = False
        self._displayed = 0  # the bytes of the current cell's displays kept

    def text(self, kept: str, more: str) -> str:
        """``kept`` with as much of ``more`` as fits."""
        room = min(self.per_stream - len(kept.encode()), self.left)
        data = more.encode()
        if len(data) > room:
            self.cut = True
            data = data[: max(room, 0)]
        self.left -= len(data)
        return kept + data.decode(errors="ignore")

    def display(self, kept: list[dict[str, Any]], bundle: dict[str, Any]) -> None:
        """Add a display's MIME bundle to a cell's ``kept`` ones if it fits whole."""
        if not kept:
            self._displayed = 0
        size = len(json.dumps(bundle, default=str).encode())
        if size > min(self.per_stream - self._displayed, self.left):
            self.cut = True
            return
        self.left -= size
        self._displayed += size
        kept.append(bundle)


async def _cells(sandbox: Sandbox, request: RunJupyterRequest, limits: Limits, kept: _Kept) -> list[CellRunResult]:
    cells = []
    per_cell_s = min(request.cell_timeout or limits.time_s, limits.time_s)
    for code in request.cells:
        cell = CellRunResult()
        async for event in sandbox.run_code(code, time_s=per_cell_s):
            if isinstance(event, CellText) and event.type == "stdout":
                cell.stdout = kept.text(cell.stdout, event.text)
            elif isinstance(event, CellText):
                cell.stderr = kept.text(cell.stderr, event.text)
            elif isinstance(event, CellResult):
                kept.display(cell.display, event.data)
            elif isinstance(event, CellError):
                lines = kept.text("", event.traceback).splitlines()
                cell.error.append({"ename": event.name, "evalue": kept.text("", event.value), "traceback": lines})
        cells.append(cell)
    return cells


async def run_jupyter(request: Request) -> Response:
    state = state_of(request)
    try:
        body = parse(RunJupyterRequest, await request.body())
        limits, capped = _limits(state, body, run_s=body.total_timeout, compile_s=body.total_timeout)
    except BadRequest as exc:
        return _refusal(str(exc))
    headers = capped_header(capped)
    started = time.monotonic()
    # The whole session is the run: its time is the request's total, within the server's limit
    # (wall-clock time: a kernel's cells are ended by the clock, as Jupyter ends them).
    total_s = limits.time_s
    try:
        sandbox = await state.engine.create_sandbox(limits=limits, timeout_s=total_s + SANDBOX_SLACK_S)
    except SandboxLimitReached as exc:
        return JSONResponse({"detail": str(exc), "message": str(exc)}, status_code=429, headers={"Retry-After": "1"})
    except EngineError as exc:
        return JSONResponse(RunJupyterResponse(status="SandboxError", message=str(exc)).model_dump(), headers=headers)
    try:
        kept = _Kept(limits.output_bytes)
        with anyio.move_on_after(total_s):
            cells = await _cells(sandbox, body, limits, kept)
            spent = time.monotonic() - started
            driver = CommandRunResult(status="Finished", return_code=0, execution_time=spent)
            notes = [_capped_message(capped, limits)]
            if kept.cut:
                notes.append(f"output past {limits.output_bytes} bytes per stream was cut")
            answer = RunJupyterResponse(
                status="Success", driver=driver, cells=cells, message="; ".join(note for note in notes if note)
            )
            state.metrics.verdict("sandbox_fusion", Outcome.OK.value)
            return JSONResponse(answer.model_dump(), headers=headers)
        late = CommandRunResult(status="TimeLimitExceeded", execution_time=time.monotonic() - started)
        state.metrics.verdict("sandbox_fusion", Outcome.TIMEOUT.value)
        answer = RunJupyterResponse(status="Failed", driver=late, message=_capped_message(capped, limits))
        return JSONResponse(answer.model_dump(), headers=headers)
    except EngineError as exc:
        return JSONResponse(RunJupyterResponse(status="SandboxError", message=str(exc)).model_dump(), headers=headers)
    finally:
        with anyio.CancelScope(shield=True):
            await state.engine.sandboxes.kill(sandbox.id)


SANDBOX_FUSION = Dialect(
    "sandbox_fusion",
    ("/run_code", "/run_jupyter"),
    (Route("/run_code", run_code, methods=["POST"]), Route("/run_jupyter", run_jupyter, methods=["POST"])),
    guarded=True,
    work=True,
)
