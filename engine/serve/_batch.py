"""The native batch API: ``POST /v1/judge`` takes many submissions (the Python API's
``Submission``, or a record in any layout ``airlock score`` reads) and streams one NDJSON line
per submission, in input order, as soon as it and every one before it is judged.

A line is the submission's ``SubmissionResult`` with its ``index``, or, for an item that cannot
be judged (malformed, or its language's image is not built), ``{"index", "id", "error"}``
naming the problem: every item gets exactly one line. A client that goes away cancels the rest
(their containers are removed).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._errors import ImageNotFound
from .._limits import within
from .._models import Language, safe_text
from .._submission import Submission, SubmissionResult
from ..judge._datasets import DatasetError, load_json, record_id, to_submission
from ._admission import Dialect
from ._requests import BadRequest, JsonFloat, validate
from ._state import ServerState, state_of

__all__ = ["BATCH", "JudgeRequest"]

MAX_SUBMISSIONS = 100_000
Emit = Callable[[bytes], Awaitable[None]]


class JudgeRequest(BaseModel):
    """Submissions to judge: native ``Submission`` objects, or APPS/TACO and HumanEval records."""

    model_config = ConfigDict(extra="forbid")

    submissions: list[JsonValue] = Field(min_length=1, max_length=MAX_SUBMISSIONS)
    deadline_s: JsonFloat | None = Field(
        None,
        gt=0,
        le=7 * 24 * 3600,
        description="every submission has its line by then; those the sandbox could not finish are not judged "
        "(verdict sandbox_error, retryable: true), never given a verdict",
    )


class JudgeLine(SubmissionResult):
    """One line of the answer for a judged submission."""

    index: int
    limits_capped: dict[str, float] | None = Field(
        None,
        description="the limits the submission asked above the server's, with the values asked: the server's "
        "are ceilings, and it was judged within them",
    )


class JudgeErrorLine(BaseModel):
    """One line of the answer for an item that could not be judged."""

    index: int
    id: str
    error: str


def _line(payload: dict[str, Any]) -> bytes:
    return (json.dumps(payload, ensure_ascii=False) + "\n").encode()


async def _missing_images(state: ServerState, languages: set[Language]) -> dict[Language, str]:
    missing: dict[Language, str] = {}
    if state.judge is not state.engine:
        return missing  # a cluster's nodes build what they lack
    for language in languages:
        try:
            await state.engine.image_for(language)
        except ImageNotFound as exc:
            missing[language] = str(exc)
    return missing


async def _judge_all(
    state: ServerState,
    items: list[Submission | DatasetError],
    identities: list[str],
    capped: dict[int, dict[str, float]],
    deadline_s: float | None,
    emit: Emit,
) -> None:
    missing = await _missing_images(state, {item.language for item in items if isinstance(item, Submission)})
    ready: dict[int, bytes] = {}
    jobs: list[int] = []
    submissions: list[Submission] = []
    for index, item in enumerate(items):
        if isinstance(item, Submission) and item.language in missing:
            item = DatasetError(missing[item.language])
        if isinstance(item, DatasetError):
            ready[index] = _line({"index": index, "id": identities[index], "error": safe_text(str(item))})
        else:
            jobs.append(index)
            submissions.append(item)
    following = 0

    async def flush() -> None:
        nonlocal following
        while following in ready:
            await emit(ready.pop(following))
            following += 1

    await flush()
    async with state.judge.judging(submissions, deadline_s=deadline_s) as results:
        async for job, result in results:
            state.metrics.verdict("batch", result.verdict.value)
            index = jobs[job]
            lowered = {"limits_capped": capped[index]} if capped.get(index) else {}
            ready[index] = _line({"index": index, **result.model_dump(mode="json"), **lowered})
            await flush()
    await flush()


def _request(raw: bytes) -> JudgeRequest:
    """The request, its integers of any length read whole (big-number problems' arguments)."""
    try:
        document = load_json(raw)
    except (ValueError, RecursionError) as exc:
        raise BadRequest(f"body: Invalid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise BadRequest("body: Input should be an object")
    return validate(JudgeRequest, document)


class Judge:
    """An ASGI app of its own (not a request handler), so that the judging, the stream and
    watching for the client's departure share one task: a client that leaves cancels the
    judging at once."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _judge(scope, receive, send)


async def _judge(scope: Scope, receive: Receive, send: Send) -> None:
    request = Request(scope, receive)
    state = state_of(request)
    try:
        body = _request(await request.body())
    except BadRequest as exc:
        await JSONResponse({"code": 422, "message": str(exc)}, status_code=422)(scope, receive, send)
        return
    items: list[Submission | DatasetError] = []
    identities = []
    capped: dict[int, dict[str, float]] = {}
    for index, record in enumerate(body.submissions):
        identity = record_id(record, f"item-{index}")
        identities.append(identity)
        try:
            item = to_submission(record, identity)
            if item.limits is not None:
                limits, capped[index] = within(state.options.limits, item.limits)
                item = item.model_copy(update={"limits": limits})
            items.append(item)
        except DatasetError as exc:
            items.append(exc)
        except ValidationError as exc:
            items.append(DatasetError(f"limits: within the server's they are no valid whole: {exc.errors()[0]['msg']}"))
    headers = [(b"content-type", b"application/x-ndjson"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})

    async def emit(line: bytes) -> None:
        await send({"type": "http.response.body", "body": line, "more_body": True})

    async with anyio.create_task_group() as group:

        async def until_gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            group.cancel_scope.cancel()

        group.start_soon(until_gone)
        await _judge_all(state, items, identities, capped, body.deadline_s, emit)
        group.cancel_scope.cancel()
    await send({"type": "http.response.body", "body": b"", "more_body": False})


BATCH = Dialect("batch", ("/v1/",), (Route("/v1/judge", Judge(), methods=["POST"]),), guarded=True, work=True)
