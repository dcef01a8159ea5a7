"""The Connect protocol's JSON codec, as envd speaks it: unary calls are plain JSON, streams are
5-byte envelopes (a flag byte, a big-endian length) around JSON, ended by a flagged envelope."""

from __future__ import annotations

import json
import struct
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

__all__ = ["ConnectError", "end_envelope", "envelope", "read_message"]

_HEADER = struct.Struct(">BI")
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
    """The one request message, enveloped (streaming calls) or not (unary calls)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_MESSAGE_BYTES + _HEADER.size:
            raise ConnectError("resource_exhausted", f"a request message is limited to {MAX_MESSAGE_BYTES} bytes")
    if request.headers.get("content-type", "").startswith("application/connect+"):
        if len(body) < _HEADER.size:
            raise ConnectError("invalid_argument", "a streaming request needs one enveloped message")
        _, size = _HEADER.unpack_from(body)
        body = body[_HEADER.size : _HEADER.size + size]
    try:
        message = json.loads(body or b"{}")
    except ValueError as exc:
        raise ConnectError("invalid_argument", f"the request is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ConnectError("invalid_argument", "the request must be a JSON object")
    return message
