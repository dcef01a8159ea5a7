"""What the server keeps beside the engine: its options, each sandbox's access token, and how a
request finds its sandbox."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request

from .._engine import Engine, Judge
from .._errors import SandboxNotFound
from .._limits import Limits
from .._sandbox import Sandbox
from ._connect import ConnectError
from ._metrics import ServerMetrics

__all__ = ["SandboxGone", "ServeOptions", "ServerState", "state_of"]

ENVD_PORT = "49983"
# The envd version the control plane reports decides which SDK code paths run: 0.5.7 turns on
# octet-stream uploads and close_stdin, and leaves the default user to the server.
ENVD_VERSION = "0.5.7"


class ServeOptions(BaseModel):
    """How ``airlock serve`` runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    api_keys: frozenset[str] = Field(frozenset(), description="accepted X-API-KEY values; empty: any")
    limits: Limits = Field(default_factory=Limits, description="each sandbox's limits")
    max_timeout_s: float = Field(24 * 3600, gt=0, description="the longest time to live a sandbox may ask for")
    max_body_bytes: int = Field(64 * 1024 * 1024, ge=1024, description="the largest request body accepted")
    max_pending: int = Field(
        256, ge=1, le=1_000_000, description="work requests (run_code, execute, judge) in progress at once; beyond: 429"
    )
    key_concurrency: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="work requests in progress at once per API key (none for requests without a key); unset: no quota",
    )
    ray_address: str | None = Field(
        None, description="judge the batch API's submissions on this Ray cluster's nodes (auto: this machine's)"
    )


class SandboxGone(Exception):
    """The request names a sandbox that is not alive: E2B's proxy answers 502 for it."""

    def __init__(self, sandbox_id: str) -> None:
        super().__init__(sandbox_id)
        self.sandbox_id = sandbox_id


@dataclass
class ServerState:
    engine: Engine
    """Long-lived sandboxes (E2B, run_jupyter): the Docker runtime, which can exec into them."""
    jobs: Engine
    """One-shot runs and judging (SandboxFusion, Piston, the batch API): the same engine, or one
    on the OCI runtime, which starts containers faster."""
    judge: Judge
    """The batch API's judge: ``jobs``, or a Ray cluster's engine (``--ray``)."""
    options: ServeOptions
    metrics: ServerMetrics
    tokens: dict[str, str] = field(default_factory=dict)  # sandbox id -> its envd access token

    def issue_token(self, sandbox: Sandbox) -> str:
        token = self.tokens.setdefault(sandbox.id, secrets.token_hex(16))
        return token

    def forget(self, sandbox_id: str) -> None:
        self.tokens.pop(sandbox_id, None)

    def sandbox_for(self, request: Request, *, token_required: bool = True) -> Sandbox:
        """The sandbox a data-plane request is for: by the routing header, else by its token
        (SDKs that connect() without sending the header); the token must match either way,
        except on the code interpreter's ``/contexts`` calls, which the SDK sends without one."""
        token = request.headers.get("x-access-token")
        sandbox_id = request.headers.get("e2b-sandbox-id")
        if sandbox_id is None and token is not None:
            sandbox_id = next((sid for sid, known in self.tokens.items() if secrets.compare_digest(known, token)), None)
        if sandbox_id is None:
            raise SandboxGone("")
        try:
            sandbox = self.engine.sandboxes.get(sandbox_id)
        except SandboxNotFound:
            raise SandboxGone(sandbox_id) from None
        expected = self.tokens.get(sandbox.id)
        if token is None and not token_required:
            return sandbox
        if expected is not None and (token is None or not secrets.compare_digest(expected, token)):
            raise ConnectError("unauthenticated", "the access token does not match this sandbox")
        return sandbox


def state_of(request: Request) -> ServerState:
    state: ServerState = request.app.state.airlock
    return state
