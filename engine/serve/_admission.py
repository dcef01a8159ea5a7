"""The server's door: every request is named by dialect, counted, timed and logged as one JSON
line; the work dialects (SandboxFusion, Piston, the batch API) are admitted only within bounds,
so that a flood meets a 429 with ``Retry-After`` instead of an unbounded queue, and a body past
the size limit meets a 413 before it is read into memory."""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._metrics import ServerMetrics
from ._state import ServeOptions

__all__ = ["Admission", "dialect_of"]

access_log = logging.getLogger("airlock.access")

# Path prefixes and the dialect they speak, first match wins.
DIALECTS = (
    ("/run_code", "sandbox_fusion"),
    ("/run_jupyter", "sandbox_fusion"),
    ("/api/v2/", "piston"),
    ("/v1/", "batch"),
    ("/sandboxes", "e2b"),
    ("/v2/sandboxes", "e2b"),
    ("/health", "operations"),
    ("/readyz", "operations"),
    ("/metrics", "operations"),
    ("/openapi.json", "operations"),
)
# Dialects whose requests each start work in the engine; the others have their own bounds
# (E2B: the sandbox limit) or cost nothing.
WORK_DIALECTS = frozenset({"sandbox_fusion", "piston", "batch"})
RETRY_AFTER_S = 1


def dialect_of(path: str) -> str:
    return next((dialect for prefix, dialect in DIALECTS if path.startswith(prefix)), "envd")


class BodyTooLarge(Exception):
    pass


def _key_of(scope: Scope) -> str | None:
    headers = dict(scope["headers"])
    key = headers.get(b"x-api-key") or headers.get(b"authorization")
    return key.decode("latin-1") if key else None


async def _refuse(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] = []) -> None:  # noqa: B006
    body = json.dumps({"code": status, "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Admission:
    def __init__(self, app: ASGIApp, options: ServeOptions, metrics: ServerMetrics) -> None:
        self.app = app
        self.options = options
        self.metrics = metrics
        self.admitted = 0
        self.admitted_by_key: collections.Counter[str] = collections.Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        dialect = dialect_of(scope["path"])
        key = _key_of(scope)
        started = time.monotonic()
        status = 500
        sent_start = False

        async def send_counted(message: Message) -> None:
            nonlocal status, sent_start
            if message["type"] == "http.response.start":
                status, sent_start = message["status"], True
            await send(message)

        refusal = self._refusal(scope, dialect, key)
        if refusal is not None:
            reason, code, message = refusal
            self.metrics.rejected.labels(dialect, reason).inc()
            retry = [(b"retry-after", str(RETRY_AFTER_S).encode())] if code == 429 else []
            await _refuse(send_counted, code, message, retry)
            self._account(scope, dialect, key, status, started)
            return
        work = dialect in WORK_DIALECTS and scope["method"] == "POST"
        quota_key = key or ""
        if work:
            self.admitted += 1
            self.admitted_by_key[quota_key] += 1
        self.metrics.in_progress.labels(dialect).inc()
        try:
            await self.app(scope, self._bounded(receive), send_counted)
        except BodyTooLarge:
            self.metrics.rejected.labels(dialect, "too_large").inc()
            if not sent_start:
                await _refuse(send_counted, 413, self._too_large())
        finally:
            self.metrics.in_progress.labels(dialect).dec()
            if work:
                self.admitted -= 1
                self.admitted_by_key[quota_key] -= 1
                if not self.admitted_by_key[quota_key]:
                    del self.admitted_by_key[quota_key]
            self._account(scope, dialect, key, status, started)

    def _too_large(self) -> str:
        return f"the request body is larger than the server's limit of {self.options.max_body_bytes} bytes"

    def _refusal(self, scope: Scope, dialect: str, key: str | None) -> tuple[str, int, str] | None:
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.options.max_body_bytes:
            return "too_large", 413, self._too_large()
        if dialect not in WORK_DIALECTS or scope["method"] != "POST":
            return None
        if self.admitted >= self.options.max_pending:
            message = f"the server is answering {self.admitted} requests, its limit; retry after {RETRY_AFTER_S} s"
            return "queue_full", 429, message
        quota = self.options.key_concurrency
        if quota is not None and key is not None and self.admitted_by_key[key] >= quota:
            message = f"this API key has {quota} requests in progress, its quota; retry after {RETRY_AFTER_S} s"
            return "key_quota", 429, message
        return None

    def _bounded(self, receive: Receive) -> Receive:
        limit = self.options.max_body_bytes
        received = 0

        async def bounded() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge
            return message

        return bounded

    def _account(self, scope: Scope, dialect: str, key: str | None, status: int, started: float) -> None:
        seconds = time.monotonic() - started
        self.metrics.requests.labels(dialect, str(status)).inc()
        self.metrics.request_seconds.labels(dialect).observe(seconds)
        client = scope.get("client")
        record = {
            "event": "request",
            "dialect": dialect,
            "method": scope["method"],
            "path": scope["path"],
            "status": status,
            "seconds": round(seconds, 6),
            "key": hashlib.sha256(key.encode()).hexdigest()[:12] if key else None,
            "client": client[0] if client else None,
        }
        access_log.info(json.dumps(record))
