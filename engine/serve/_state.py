"""What the server keeps beside the engine: its options, whose each sandbox is and its access
token, and how a request finds its sandbox."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import HTTPConnection, Request

from .._engine import Engine
from .._errors import SandboxLimitReached, SandboxNotFound
from .._limits import Limits
from ..judge._batches import Judge
from ..sandboxes._paused import SnapshotRecord
from ..sandboxes._sandbox import Sandbox
from ..sandboxes._volumes import VolumeRecord
from ._metrics import ServerMetrics

__all__ = ["OWNER_METADATA", "Grant", "SandboxGone", "ServeOptions", "ServerState", "caller_of", "state_of"]

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
    key_sandboxes: int | None = Field(
        None,
        ge=1,
        le=4096,
        description=(
            "long-lived sandboxes alive at once per API key; unset: with several keys, an equal share"
            " of the engine's max_sandboxes (so no key can take them all), else no cap of its own"
        ),
    )
    ray_address: str | None = Field(
        None, description="judge the batch API's submissions on this Ray cluster's nodes (auto: this machine's)"
    )


class SandboxGone(Exception):
    """The request names a sandbox that is not alive: E2B's proxy answers 502 for it."""

    def __init__(self, sandbox_id: str) -> None:
        super().__init__(sandbox_id)
        self.sandbox_id = sandbox_id


@dataclass(frozen=True)
class Grant:
    """Who a sandbox belongs to (``caller_of`` the request that made it: a digest of its API key,
    None on a server without keys) and the access token its data plane answers to. Only the owner
    is ever told the token."""

    owner: str | None
    token: str


# Where a sandbox keeps whose it is, so that a sandbox paused to disk is its owner's again after
# a restart: a digest of the key, never the key.
OWNER_METADATA = "airlock.owner"
# Set in a sandbox's metadata when its URLs (``get_host``) need its traffic access token.
PRIVATE_TRAFFIC = "airlock.private-traffic"


def caller_of(request: Request) -> str | None:
    """Who sent this request: a digest of the API key it authenticated with (see ``_admission``),
    None without one."""
    key: str | None = request.scope.get("state", {}).get("api_key")
    return None if key is None else hashlib.sha256(key.encode()).hexdigest()


@dataclass
class ServerState:
    """The server's engines and options, and whose each sandbox is.

    A server with several API keys is multi-tenant: a sandbox belongs to the key that created it.
    Another key gets what E2B answers for a sandbox that does not exist, on every route: the
    control plane's 404, the data plane's 502 (whose requests carry the sandbox's access token,
    which only its owner is told).
    """

    engine: Engine
    """Long-lived sandboxes (E2B, run_jupyter) and one-shot runs (SandboxFusion, Piston), on the
    runtime the settings name."""
    judge: Judge
    """The batch API's judge: ``engine``, or a Ray cluster's engine (``--ray``)."""
    options: ServeOptions
    metrics: ServerMetrics
    grants: dict[str, Grant] = field(default_factory=dict)  # sandbox id -> its grant
    creating: Counter[str | None] = field(default_factory=Counter)  # owner -> sandboxes being made
    snapshotting: Counter[str | None] = field(default_factory=Counter)  # owner -> snapshots being taken
    making_volumes: Counter[str | None] = field(default_factory=Counter)  # owner -> volumes being made

    def __post_init__(self) -> None:
        # Sandboxes the engine took up from disk (paused by this server before a restart) are
        # their owners' again, with fresh tokens that connect() hands out.
        for sandbox in self.engine.sandboxes.list():
            self.grant(sandbox, sandbox.metadata.get(OWNER_METADATA))

    @property
    def sandboxes_per_key(self) -> int | None:
        keys = len(self.options.api_keys)
        if self.options.key_sandboxes is not None or keys < 2:
            return self.options.key_sandboxes
        return max(1, self.engine.settings.max_sandboxes // keys)

    @property
    def snapshots_per_key(self) -> int | None:
        keys = len(self.options.api_keys)
        return None if keys < 2 else max(1, self.engine.settings.max_snapshots // keys)

    def making_one(self, request: Request) -> contextlib.AbstractContextManager[None]:
        """Hold a place for one more sandbox of the caller's while it is made (see ``_within_share``)."""
        held = len(self.listed(request))
        return _within_share(self.creating, caller_of(request), held, self.sandboxes_per_key, "sandboxes alive")

    def taking_one(self, request: Request) -> contextlib.AbstractContextManager[None]:
        """Hold a place for one more snapshot of the caller's while it is taken (see ``_within_share``)."""
        held = len(self.snapshots(request))
        return _within_share(self.snapshotting, caller_of(request), held, self.snapshots_per_key, "snapshots kept")

    def making_volume(self, request: Request) -> contextlib.AbstractContextManager[None]:
        """Hold a place for one more volume of the caller's while it is made (see ``_within_share``)."""
        keys = len(self.options.api_keys)
        share = None if keys < 2 else max(1, self.engine.settings.max_volumes // keys)
        held = len(self.volumes(request))
        return _within_share(self.making_volumes, caller_of(request), held, share, "volumes kept")

    def volumes(self, request: Request) -> list[VolumeRecord]:
        """The caller's volumes, oldest first."""
        caller = caller_of(request)
        return [kept for kept in self.engine.volumes.list() if kept.metadata.get(OWNER_METADATA) == caller]

    def volume_of(self, request: Request, volume_id: str) -> VolumeRecord | None:
        """The caller's volume with this id (or name), None for one not kept or not theirs alike."""
        return next((kept for kept in self.volumes(request) if volume_id in (kept.id, kept.name)), None)

    def snapshots(self, request: Request) -> list[SnapshotRecord]:
        """The caller's snapshots, oldest first."""
        caller = caller_of(request)
        return [kept for kept in self.engine.sandboxes.snapshots() if kept.metadata.get(OWNER_METADATA) == caller]

    def grant(self, sandbox: Sandbox, owner: str | None) -> Grant:
        """Give ``sandbox`` to ``owner``, with a fresh access token. A sandbox the server made for
        itself (``/run_jupyter``'s) has no grant: no route reaches it."""
        alive = {s.id for s in self.engine.sandboxes.list()}
        for gone in [sandbox_id for sandbox_id in self.grants if sandbox_id not in alive]:
            del self.grants[gone]
        granted = Grant(owner=owner, token=secrets.token_hex(16))
        self.grants[sandbox.id] = granted
        return granted

    def forget(self, sandbox_id: str) -> None:
        self.grants.pop(sandbox_id, None)

    def owned(self, request: Request, sandbox_id: str) -> tuple[Sandbox, Grant]:
        """A sandbox of the caller's, with its grant; ``SandboxNotFound`` for one that is not
        alive or not theirs, alike."""
        granted = self.grants.get(sandbox_id)
        if granted is not None and granted.owner == caller_of(request):
            with contextlib.suppress(SandboxNotFound):
                return self.engine.sandboxes.get(sandbox_id), granted
        raise SandboxNotFound(f"no sandbox {sandbox_id!r} is alive (it was killed, expired, or never made)")

    def listed(self, request: Request) -> list[Sandbox]:
        """The caller's sandboxes, oldest first."""
        caller = caller_of(request)
        return [
            sandbox
            for sandbox in self.engine.sandboxes.list()
            if (granted := self.grants.get(sandbox.id)) is not None and granted.owner == caller
        ]

    def sandbox_for(self, request: Request) -> Sandbox:
        """The sandbox a data-plane request is for, by the routing header, else by its access
        token (SDKs that connect() without the header); either way the request must carry the
        sandbox's token (``X-Access-Token``, or ``E2B-Traffic-Access-Token`` as the code
        interpreter's ``/contexts`` calls send it). Anything else is a sandbox that does not exist."""
        tokens = [request.headers.get(name) for name in ("x-access-token", "e2b-traffic-access-token")]
        given = [token for token in tokens if token]
        sandbox_id = request.headers.get("e2b-sandbox-id")
        if sandbox_id is None:
            sandbox_id = next(
                (sid for sid, g in self.grants.items() if any(secrets.compare_digest(g.token, t) for t in given)), ""
            )
        granted = self.grants.get(sandbox_id)
        if granted is None or not any(secrets.compare_digest(granted.token, token) for token in given):
            raise SandboxGone(sandbox_id)
        try:
            return self.engine.sandboxes.get(sandbox_id)
        except SandboxNotFound:
            raise SandboxGone(sandbox_id) from None


@contextlib.contextmanager
def _within_share(
    pending: Counter[str | None], owner: str | None, held: int, cap: int | None, what: str
) -> Iterator[None]:
    """Count one more of ``owner``'s in ``pending`` while it is made; ``SandboxLimitReached`` when
    ``owner`` has its share (``cap``) already, counting those being made, which a burst of
    concurrent requests would otherwise all pass."""
    if cap is not None and held + pending[owner] >= cap:
        raise SandboxLimitReached(f"this API key has {cap} {what}, its share; remove one or retry later")
    pending[owner] += 1
    try:
        yield
    finally:
        pending[owner] -= 1


def state_of(request: HTTPConnection) -> ServerState:
    state: ServerState = request.app.state.airlock
    return state
