"""E2B's code-interpreter API (its port 49999): ``/execute`` streams a cell's output as NDJSON,
``/contexts`` manages interpreter states. The SDK builds its ``Execution`` from these lines."""

from __future__ import annotations

import datetime
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .._errors import ContextNotFound, SandboxError, SandboxLimitReached
from ..e2b import result_fields
from ..sandboxes._interpreter import (
    CellEnd,
    CellError,
    CellEvent,
    CellQuiet,
    CellResult,
    CellText,
    CodeContext,
)
from ._control import json_body
from ._state import state_of

__all__ = ["code_routes"]

# The SDK's own default; it never sends its timeout, so the server keeps one.
CELL_TIME_S = 300.0
KEEPALIVE_S = 5.0
LANGUAGE_ALIASES = {"python3": "python", "py": "python", "js": "javascript", "ts": "typescript", "sh": "bash"}


def _language(value: object) -> str:
    if value is None:
        return "python"
    if not isinstance(value, str):
        raise ValueError("language must be a string")
    return LANGUAGE_ALIASES.get(value.lower(), value.lower())


def _error(status: int, message: str) -> Response:
    return JSONResponse({"code": status, "message": message}, status_code=status)


def _line(event: dict[str, Any]) -> bytes:
    return json.dumps(event, default=str).encode() + b"\n"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


def _result(event: CellResult) -> dict[str, Any]:
    fields, extra = result_fields(event)
    return {"type": "result", "is_main_result": event.is_main_result, **fields, **({"extra": extra} if extra else {})}


def _wire(event: CellEvent) -> list[dict[str, Any]]:
    if isinstance(event, CellText):
        return [{"type": event.type, "text": event.text, "timestamp": _now()}]
    if isinstance(event, CellResult):
        return [_result(event)]
    if isinstance(event, CellError):
        return [{"type": "error", "name": event.name, "value": event.value, "traceback": event.traceback}]
    if isinstance(event, CellQuiet):
        return [{"type": "keepalive"}]
    assert isinstance(event, CellEnd)
    return [{"type": "number_of_executions", "execution_count": event.execution_count}, {"type": "end_of_execution"}]


def _context_json(context: CodeContext) -> dict[str, Any]:
    return {"id": context.id, "language": context.language, "cwd": context.cwd}


async def execute(request: Request) -> Response:
    sandbox = state_of(request).sandbox_for(request)
    try:
        body = await json_body(request)
        code = body.get("code")
        if not isinstance(code, str):
            raise ValueError("code must be a string")
        context_id, language = body.get("context_id"), body.get("language")
        if context_id and language:
            raise ValueError("name a context or a language, not both")
        env = body.get("env_vars") or {}
        if not isinstance(env, dict):
            raise ValueError("env_vars must map names to values")
        cell = sandbox.run_code(
            code,
            context_id=context_id or None,
            language=_language(language),
            env={str(k): str(v) for k, v in env.items()},
            time_s=CELL_TIME_S,
            quiet_s=KEEPALIVE_S,
        )
    except ValueError as exc:
        return _error(400, str(exc))
    except ContextNotFound as exc:
        return _error(404, str(exc))
    except SandboxError as exc:  # paused
        return _error(409, str(exc))

    async def lines() -> AsyncIterator[bytes]:
        try:
            async for event in cell:
                for wire in _wire(event):
                    yield _line(wire)
        except SandboxError as exc:
            yield _line({"type": "error", "name": "SandboxError", "value": str(exc), "traceback": ""})
            yield _line({"type": "end_of_execution"})
        finally:
            with anyio.CancelScope(shield=True):
                await cell.aclose()

    return StreamingResponse(lines(), media_type="application/x-ndjson")


async def create_context(request: Request) -> Response:
    sandbox = state_of(request).sandbox_for(request)
    try:
        body = await json_body(request)
        language = body.get("language")
        cwd = body.get("cwd") or None
        if cwd is not None and not isinstance(cwd, str):
            raise ValueError("cwd must be a path")
        context = sandbox.create_context(_language(language), cwd)
    except ValueError as exc:
        return _error(400, str(exc))
    except SandboxLimitReached as exc:
        return _error(429, str(exc))
    return JSONResponse(_context_json(context))


async def list_contexts(request: Request) -> Response:
    sandbox = state_of(request).sandbox_for(request)
    return JSONResponse([_context_json(context) for context in sandbox.contexts.values()])


async def restart_context(request: Request) -> Response:
    sandbox = state_of(request).sandbox_for(request)
    try:
        await sandbox.restart_context(request.path_params["context_id"])
    except ContextNotFound as exc:
        return _error(404, str(exc))
    return JSONResponse(_context_json(sandbox.context(request.path_params["context_id"])))


async def remove_context(request: Request) -> Response:
    sandbox = state_of(request).sandbox_for(request)
    try:
        await sandbox.remove_context(request.path_params["context_id"])
    except ContextNotFound as exc:
        return _error(404, str(exc))
    return Response(status_code=204)


def code_routes() -> list[Route]:
    return [
        Route("/execute", execute, methods=["POST"]),
        Route("/contexts", create_context, methods=["POST"]),
        Route("/contexts", list_contexts, methods=["GET"]),
        Route("/contexts/{context_id}/restart", restart_context, methods=["POST"]),
        Route("/contexts/{context_id}", remove_context, methods=["DELETE"]),
    ]
