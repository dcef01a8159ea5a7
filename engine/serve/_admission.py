"""The server's door: every request is named by dialect, counted, timed and logged as one JSON
line; the guarded routes answer only a request that carries one of the server's API keys (401
otherwise), and the key it authenticated with is the caller every route sees (whose sandboxes,
whose quota); the work dialects (SandboxFusion, Piston, the batch API) are admitted only within
bounds, so that a flood meets a 429 with ``Retry-After`` instead of an unbounded queue, and a
body past the size limit meets a 413 before it is read into memory."""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._metrics import ServerMetrics
from ._state import ServeOptions

__all__ = ["Admission", "Dialect", "authenticated_key", "quota_key"]

access_log = logging.getLogger("airlock.access")

RETRY_AFTER_S = 1


@dataclass(frozen=True)
class Dialect:
    """One protocol the server speaks, stated in one place: the path prefixes it answers under
    (the first dialect whose prefix a path starts with speaks it), its routes, whether they need
    an API key, and whether its requests start work in the engine (admitted within
    ``--max-pending`` and the key's quota; the others have bounds of their own)."""

    name: str
    prefixes: tuple[str, ...]
    routes: tuple[BaseRoute, ...]
    guarded: bool
    work: bool = False
    hosts: re.Pattern[str] | None = None
    """A dialect that answers by the request's Host, whatever its path, before every other."""

    def speaks(self, path: str) -> bool:
        return path.startswith(self.prefixes)

    def answers(self, scope: Scope) -> bool:
        """Whether this dialect answers the request: by its Host, else by its path."""
        if self.hosts is not None:
            return self.hosts.match(Headers(scope=scope).get("host", "")) is not None
        return self.speaks(scope["path"])


class BodyTooLarge(Exception):
    pass


def _presented(scope: Scope) -> list[str]:
    """The keys a request presents: ``X-API-KEY``, ``Authorization`` bare or as a bearer token
    (a Prometheus scraper's)."""
    headers = dict(scope["headers"])
    authorization = headers.get(b"authorization", b"").decode("latin-1")
    given = [headers.get(b"x-api-key", b"").decode("latin-1"), authorization, authorization.removeprefix("Bearer ")]
    return [value for value in given if value]


def authenticated_key(scope: Scope, keys: frozenset[str]) -> str | None:
    """The server's key this request carries, None when it carries none of them. Only a key that
    authenticated names the caller: a second header beside it changes nothing."""
    given = _presented(scope)
    return next((key for key in keys for value in given if secrets.compare_digest(value, key)), None)


def quota_key(scope: Scope, keys: frozenset[str]) -> str | None:
    """Whose quota a request counts against: the key it authenticated with; on a server without
    keys (a trusted network, where no key can be checked), the key it presents, as a label."""
    if keys:
        return authenticated_key(scope, keys)
    given = _presented(scope)
    return given[0] if given else None


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
    def __init__(
        self, app: ASGIApp, options: ServeOptions, metrics: ServerMetrics, dialects: Sequence[Dialect]
    ) -> None:
        self.app = app
        self.options = options
        self.metrics = metrics
        self.dialects = dialects
        self.admitted = 0
        self.admitted_by_key: collections.Counter[str] = collections.Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        speaking = next(d for d in self.dialects if d.answers(scope))
        dialect = speaking.name
        caller = authenticated_key(scope, self.options.api_keys)
        scope.setdefault("state", {})["api_key"] = caller
        key = quota_key(scope, self.options.api_keys)
        started = time.monotonic()
        status = 500
        sent_start = False

        async def send_counted(message: Message) -> None:
            nonlocal status, sent_start
            if message["type"] == "http.response.start":
                status, sent_start = message["status"], True
            await send(message)

        refusal = self._refusal(scope, speaking, key)
        if refusal is not None:
            reason, code, message = refusal
            self.metrics.rejected.labels(dialect, reason).inc()
            retry = [(b"retry-after", str(RETRY_AFTER_S).encode())] if code == 429 else []
            await _refuse(send_counted, code, message, retry)
            self._account(scope, dialect, key, status, started)
            return
        work = speaking.work and scope["method"] == "POST"
        counted = key or ""
        if work:
            self.admitted += 1
            self.admitted_by_key[counted] += 1
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
                self.admitted_by_key[counted] -= 1
                if not self.admitted_by_key[counted]:
                    del self.admitted_by_key[counted]
            self._account(scope, dialect, key, status, started)

    def _too_large(self) -> str:
        return f"the request body is larger than the server's limit of {self.options.max_body_bytes} bytes"

    def _refusal(self, scope: Scope, dialect: Dialect, key: str | None) -> tuple[str, int, str] | None:
        """Why the request is refused at the door, if it is (``key``: its quota's)."""
        if self.options.api_keys and key is None and dialect.guarded:
            return "unauthenticated", 401, "a valid X-API-KEY header is required"
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.options.max_body_bytes:
            return "too_large", 413, self._too_large()
        if not dialect.work or scope["method"] != "POST":
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
