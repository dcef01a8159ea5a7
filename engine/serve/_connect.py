"""The Connect protocol's JSON codec, as envd speaks it: unary calls are plain JSON, streams are
5-byte envelopes (a flag byte, a big-endian length) around JSON, ended by a flagged envelope."""

from __future__ import annotations

import json
import struct
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

__all__ = ["ConnectError", "end_envelope", "envelope", "read_message", "read_messages"]

_HEADER = struct.Struct(">BI")
COMPRESSED = 0x01
END_OF_STREAM = 0x02
# A request message larger than this is refused; envd's requests are small JSON.
MAX_MESSAGE_BYTES = 1 << 20
_STATUS = {
    "invalid_argument": 400,
    "unauthenticated": 401,
    "permission_denied": 403,
    "not_found": 404,
    "already_exists": 409,
    "resource_exhausted": 429,
    "internal": 500,
    "unimplemented": 501,
    "unavailable": 503,
    "deadline_exceeded": 504,
}


class ConnectError(Exception):
    """An RPC's failure, by Connect code; the SDK raises its own exception for each."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def response(self) -> Response:
        return JSONResponse({"code": self.code, "message": self.message}, status_code=_STATUS.get(self.code, 500))

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}


def envelope(message: dict[str, Any], flags: int = 0) -> bytes:
    data = json.dumps(message, separators=(",", ":")).encode()
    return _HEADER.pack(flags, len(data)) + data


def end_envelope(error: ConnectError | None = None) -> bytes:
    return envelope(error.body() if error else {}, END_OF_STREAM)


async def read_message(request: Request) -> dict[str, Any]:
    """The one request message, enveloped (server-streaming calls) or not (unary calls)."""
    if request.headers.get("content-type", "").startswith("application/connect+"):
        message = await anext(read_messages(request), None)
        if message is None:
            raise ConnectError("invalid_argument", "a streaming request needs one enveloped message")
        return message
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_MESSAGE_BYTES:
            raise ConnectError("resource_exhausted", f"a request message is limited to {MAX_MESSAGE_BYTES} bytes")
    return _decoded(body or b"{}")


async def read_messages(request: Request) -> AsyncIterator[dict[str, Any]]:
    """A streaming request's enveloped messages, each as soon as it has arrived whole."""
    pending = bytearray()
    async for chunk in request.stream():
        pending += chunk
        while len(pending) >= _HEADER.size:
            flags, size = _HEADER.unpack_from(pending)
            if size > MAX_MESSAGE_BYTES:
                raise ConnectError("resource_exhausted", f"a request message is limited to {MAX_MESSAGE_BYTES} bytes")
            if len(pending) < _HEADER.size + size:
                break
            body = bytes(pending[_HEADER.size : _HEADER.size + size])
            del pending[: _HEADER.size + size]
            if flags & END_OF_STREAM:
                return
            if flags & COMPRESSED:
                raise ConnectError("invalid_argument", "compressed messages are not accepted (send identity)")
            yield _decoded(body)
    if pending:
        raise ConnectError("invalid_argument", "the request ended inside an enveloped message")


def _decoded(body: bytes | bytearray) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise ConnectError("invalid_argument", f"the request is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ConnectError("invalid_argument", "the request must be a JSON object")
    return message
