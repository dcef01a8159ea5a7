"""Piston's v2 API (``POST /api/v2/execute``, ``GET /api/v2/runtimes``), answered by the engine:
the client that calls a Piston server (reward-kit's C++ rewards, open-r1) changes its URL and
nothing else. Each request is one program run in a fresh sandbox; nothing here but translation.
"""

from __future__ import annotations

import base64
import re
import signal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._errors import EngineError
from .._languages import LANGUAGE_NAMES, TOOLCHAINS, toolchain
from .._models import Language, Outcome, RunResult
from ..harness.protocol import PROGRAM_FILE
from ._admission import Dialect
from ._requests import BadRequest, JsonInt, capped_header, parse, request_limits, unbuilt_stderr
from ._state import state_of

__all__ = ["PISTON", "PistonExecute", "PistonResult", "PistonRuntime"]

# Piston's language names and aliases, and the versions our images hold.
RUNTIMES: tuple[tuple[Language, str, str, tuple[str, ...]], ...] = tuple(
    (chain.language, chain.names.piston, chain.names.version, chain.names.piston_aliases) for chain in TOOLCHAINS
)
ALIASES = {name: language for language, piston, _, aliases in RUNTIMES for name in (piston, *aliases)}
# Piston's own limits on a request's files and arguments are its operator's; these are ours.
MAX_FILES = 64
MAX_ARGS = 256
# A stage killed for its time, memory or output is reported as Piston reports it.
KILLED = {Outcome.TIMEOUT: "TO", Outcome.MEMORY_LIMIT: "SG", Outcome.OUTPUT_LIMIT: "OL"}


class PistonFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # Piston makes folders for names with slashes; here files sit in one folder.
    name: str | None = Field(
        None,
        pattern=r"^([^/\x00.][^/\x00]*|\.[^/\x00.][^/\x00]*|\.\.[^/\x00]+)?$",
        description="a plain name: no folders, not . or ..",
    )
    content: str
    encoding: Literal["utf8", "base64", "hex"] = "utf8"

    def text(self) -> str:
        """The content as the engine carries it: raw bytes that are not UTF-8 kept as such
        (surrogate escapes), as the file Piston writes holds them. Decoded as Piston's Node does
        (``Buffer.from``): base64 skips what is not of its alphabet and needs no padding, hex
        stops at the first pair that is not hex."""
        if self.encoding == "utf8":
            return self.content
        if self.encoding == "base64":
            kept = "".join(char for char in self.content if char in _BASE64_ALPHABET).split("=")[0]
            kept = kept.translate(_URL_SAFE)
            kept = kept[: len(kept) - (len(kept) % 4 == 1)]
            data = base64.b64decode(kept + "=" * (-len(kept) % 4))
        else:
            pairs = re.match(r"(?:[0-9a-fA-F]{2})*", self.content)
            data = bytes.fromhex(pairs.group(0) if pairs else "")
        return data.decode("utf-8", errors="surrogateescape")


_BASE64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_=")
# Node reads the URL-safe alphabet's two letters as the standard ones.
_URL_SAFE = str.maketrans("-_", "+/")


class PistonExecute(BaseModel):
    """Piston's execute request; unknown fields are ignored, as Piston does."""

    model_config = ConfigDict(extra="ignore")

    language: str = Field(
        json_schema_extra={"enum": list[JsonValue](sorted(ALIASES))}, description="a name or alias, any case"
    )
    version: str = "*"
    files: list[PistonFile] = Field(
        min_length=1, max_length=MAX_FILES, description="the program first; the rest beside it, by plain name"
    )
    stdin: str = ""
    args: list[str] = Field(default_factory=list, max_length=MAX_ARGS)
    compile_timeout: JsonInt = Field(10000, gt=0, le=3_600_000, description="milliseconds")
    run_timeout: JsonInt = Field(3000, gt=0, le=3_600_000, description="milliseconds")
    compile_memory_limit: JsonInt = Field(-1, le=65536 << 20, description="bytes; -1: the server's limit")
    run_memory_limit: JsonInt = Field(-1, le=65536 << 20, description="bytes; -1: the server's limit")


def _message(status: int, text: str) -> Response:
    return JSONResponse({"message": text}, status_code=status)


class PistonStage(BaseModel):
    """A stage's result; ``status`` is present only when the stage failed."""

    stdout: str
    stderr: str
    output: str
    code: int | None
    signal: str | None
    status: Literal["RE", "SG", "TO", "OL", "EL", "XX"] | None = None


class PistonResult(BaseModel):
    """Piston's answer to ``execute``; ``compile`` is present for compiled languages only."""

    language: str
    version: str
    compile: PistonStage | None = None
    run: PistonStage | None = None


class PistonRuntime(BaseModel):
    language: str
    version: str
    aliases: list[str]


def _stage(stdout: str, stderr: str, code: int | None, signal_name: str | None, status: str | None) -> PistonStage:
    failed = {"status": status} if status is not None else {}
    return PistonStage.model_validate(
        {"stdout": stdout, "stderr": stderr, "output": stdout + stderr, "code": code, "signal": signal_name, **failed}
    )


def _answer(language: Language, result: RunResult) -> PistonResult:
    _, piston, version, _ = next(runtime for runtime in RUNTIMES if runtime[0] == language)
    commands = toolchain(language).commands
    compiled = commands is not None and commands.compile is not None
    answer = PistonResult(language=piston, version=version)
    if result.outcome is Outcome.COMPILE_ERROR and not compiled:
        answer.run = _stage("", unbuilt_stderr(result), 1, None, "RE")
        return answer
    if result.outcome is Outcome.COMPILE_ERROR:
        message = result.error.message if result.error else ""
        answer.compile = _stage("", message, 1, None, "RE")
        return answer
    if compiled:
        answer.compile = _stage("", "", 0, None, None)
    if result.outcome in KILLED:
        answer.run = _stage(result.stdout, result.stderr, None, "SIGKILL", KILLED[result.outcome])
    elif result.signal is not None:
        answer.run = _stage(result.stdout, result.stderr, None, signal.Signals(result.signal).name, "SG")
    else:
        failed = None if result.exit_code == 0 else "RE"
        answer.run = _stage(result.stdout, result.stderr, result.exit_code, None, failed)
    return answer


def _program_files(files: list[PistonFile], language: Language) -> tuple[str, dict[str, str]]:
    """The program (the first file) and the files beside it, by name. Piston writes the files
    into one folder in order, so a later file of the same name replaces an earlier one (the
    program's own too); here the others go beside the program, where it is compiled and imports
    from, and into its working directory."""
    program = files[0].text()
    beside: dict[str, str] = {}
    for number, file in enumerate(files[1:], start=1):
        beside[file.name or f"file{number}.code"] = file.text()
    for name in {files[0].name, _source_name(program, language)} - {None}:
        program = beside.pop(str(name), program)
    return program, beside


def _source_name(program: str, language: Language) -> str:
    commands = toolchain(language).commands_for(program)
    return commands.source if commands is not None else PROGRAM_FILE


async def execute(request: Request) -> Response:
    state = state_of(request)
    try:
        body = parse(PistonExecute, await request.body())
        language = ALIASES.get(body.language.lower())
        if language is None:
            raise BadRequest(f"{body.language} is not a runtime here; the runtimes are {', '.join(sorted(ALIASES))}")
        memory_mb = body.run_memory_limit >> 20 if body.run_memory_limit > 0 else None
        limits, capped = request_limits(
            state.options.limits,
            run_s=body.run_timeout / 1000,
            compile_s=body.compile_timeout / 1000,
            memory_mb=memory_mb,
        )
        program, beside = _program_files(body.files, language)
    except BadRequest as exc:
        return _message(400, str(exc))
    # Piston's answer has no field for it: a header says what was lowered to the server's limits.
    headers = capped_header(capped)
    try:
        result = await state.engine.run(
            program, stdin=body.stdin, language=language, limits=limits, args=body.args, files=beside
        )
    except EngineError as exc:
        return _message(500, str(exc))
    state.metrics.verdict("piston", result.outcome.value)
    if result.outcome is Outcome.SANDBOX_ERROR:
        return _message(500, result.error.message if result.error else "the sandbox failed")
    return JSONResponse(_answer(language, result).model_dump(exclude_unset=True), headers=headers)


async def runtimes(request: Request) -> Response:
    listed = [
        PistonRuntime(language=piston, version=version, aliases=list(aliases)).model_dump()
        for language, piston, version, aliases in RUNTIMES
        if language in LANGUAGE_NAMES
    ]
    return JSONResponse(listed)


PISTON = Dialect(
    "piston",
    ("/api/v2/",),
    (
        Route("/api/v2/execute", execute, methods=["POST"]),
        Route("/api/v2/runtimes", runtimes, methods=["GET"]),
        Route("/api/v2/piston/execute", execute, methods=["POST"]),
        Route("/api/v2/piston/runtimes", runtimes, methods=["GET"]),
    ),
    guarded=True,
    work=True,
)
