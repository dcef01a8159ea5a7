"""Code-interpreter contexts: a persistent IPython shell per context (a Node or Bash one for
JavaScript, TypeScript and Bash), running in a sandbox as its user (``images/python/kernel.py``),
driven over the process's stdin and stdout. A sandbox holds
its contexts (:meth:`Sandbox.run_code`, :meth:`Sandbox.create_context`).

State persists between cells of a context; a sandbox may hold several. One cell runs at a time
per context. A cell past its time is interrupted (SIGINT, as Jupyter does); one that ignores the
interrupt has its context restarted, and says so in its error.
"""

from __future__ import annotations

import collections
import contextlib
import json
import secrets
import signal
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .._errors import SandboxError
from ..runtime import Lines
from ..runtime._policy import SANDBOX_USER_HOME

if TYPE_CHECKING:
    from ._sandbox import Output, Process, Sandbox

__all__ = [
    "CellEnd",
    "CellError",
    "CellEvent",
    "CellQuiet",
    "CellResult",
    "CellText",
    "CodeContext",
]

KERNEL = ("python3", "/opt/airlock/kernel.py")
# IPython for Python; Node (kernel.js) for JavaScript and TypeScript; Bash. All in the Python image.
LANGUAGES = ("python", "javascript", "typescript", "bash")
INTERPRETER_IMAGE_LANGUAGE = "python"
# A kernel imports IPython (and copies a font cache) before it is ready.
START_TIMEOUT_S = 60.0
# After an interrupt, the time a cell has to wind down before its context is restarted.
INTERRUPT_GRACE_S = 5.0
MAX_LINE_BYTES = 64 << 20


class CellText(BaseModel):
    model_config = ConfigDict(frozen=True)
    type: Literal["stdout", "stderr"]
    text: str


class CellResult(BaseModel):
    """A MIME bundle: the cell's value (``is_main_result``), a ``display()``, or a figure."""

    model_config = ConfigDict(frozen=True)
    type: Literal["result"]
    is_main_result: bool
    data: dict[str, Any]


class CellError(BaseModel):
    model_config = ConfigDict(frozen=True)
    type: Literal["error"]
    name: str
    value: str
    traceback: str


class CellEnd(BaseModel):
    model_config = ConfigDict(frozen=True)
    type: Literal["end"]
    execution_count: int


class CellQuiet(BaseModel):
    """Nothing happened for ``quiet_s``: a cue for streams that must show they are alive."""

    model_config = ConfigDict(frozen=True)
    type: Literal["quiet"]


CellEvent = Annotated[CellText | CellResult | CellError | CellEnd | CellQuiet, Field(discriminator="type")]
_events: TypeAdapter[CellEvent] = TypeAdapter(CellEvent)


class CodeContext:
    """One interpreter state in a sandbox."""

    def __init__(
        self, sandbox: Sandbox, language: str = "python", cwd: str = SANDBOX_USER_HOME, *, context_id: str | None = None
    ) -> None:
        if language not in LANGUAGES:
            raise ValueError(f"the code interpreter runs {', '.join(LANGUAGES)}, not {language!r}")
        if sandbox.template != INTERPRETER_IMAGE_LANGUAGE:
            raise ValueError(
                f"the code interpreter is in the Python image (the templates base, code-interpreter-v1 and "
                f"python); this sandbox runs the {sandbox.template} image"
            )
        self.id = context_id or secrets.token_hex(8)
        self.language = language
        self.cwd = cwd
        self._sandbox = sandbox
        self._lock = anyio.Lock()
        self._process: Process | None = None
        self._stack = contextlib.ExitStack()
        self._output: MemoryObjectReceiveStream[Output] | None = None
        self._lines = Lines(MAX_LINE_BYTES)
        self._ready: collections.deque[bytes] = collections.deque()
        self._died: CellEnd | None = None

    async def run(
        self,
        code: str,
        *,
        env: Mapping[str, str] | None = None,
        time_s: float = 300.0,
        quiet_s: float | None = None,
    ) -> AsyncGenerator[CellEvent, None]:
        """Run one cell; its events as they come, ending with :class:`CellEnd` (and a
        :class:`CellQuiet` after each ``quiet_s`` without any)."""
        async with self._lock:
            await self._ensure_started()
            await self._send({"code": code, "env_vars": dict(env or {})})
            ended = False
            try:
                deadline = anyio.current_time() + time_s
                async for event in self._cell_events(deadline, f"the cell ran past {time_s:g} s", quiet_s):
                    ended = isinstance(event, CellEnd)
                    yield event
            finally:
                if not ended:
                    # The caller went away mid-cell: stop the cell, as Jupyter does on a disconnect.
                    with anyio.CancelScope(shield=True):
                        async for _ in self._cell_events(anyio.current_time(), "the client went away"):
                            pass

    async def restart(self) -> None:
        async with self._lock:
            await self._stop()
            await self._ensure_started()

    async def close(self) -> None:
        async with self._lock:
            await self._stop()

    def abandon(self) -> None:
        """Let go of the kernel without stopping it: its sandbox is being removed."""
        self._stack.close()
        self._output = None

    async def _cell_events(self, deadline: float, why: str, quiet_s: float | None = None) -> AsyncIterator[CellEvent]:
        """The running cell's events up to its end; past ``deadline`` it is interrupted, and past
        the grace after that its context is restarted."""
        interrupted = False
        while True:
            wake = deadline if quiet_s is None else min(deadline, anyio.current_time() + quiet_s)
            event = await self._next_event(wake)
            if event is None and anyio.current_time() < deadline:
                yield CellQuiet(type="quiet")
                continue
            if event is not None:
                yield event
                if isinstance(event, CellEnd):
                    return
                continue
            if not interrupted and self._process is not None:
                interrupted = True
                deadline = anyio.current_time() + INTERRUPT_GRACE_S
                with contextlib.suppress(SandboxError):
                    await self._process.signal(signal.SIGINT)
                continue
            await self._stop()
            yield CellError(
                type="error",
                name="TimeoutError",
                value=f"{why}; it ignored the interrupt, so its context was restarted",
                traceback="",
            )
            yield CellEnd(type="end", execution_count=0)
            return

    async def _next_event(self, deadline: float) -> CellEvent | None:
        """The next event, None at the deadline; a kernel that died ends the cell with an error."""
        if self._died is not None:
            ended, self._died = self._died, None
            return ended
        while True:
            line: bytes | None = None
            with anyio.move_on_at(deadline):
                line = await self._next_line()
            if line is None:
                return None
            if line == b"":
                process = self._process
                await self._stop()
                status = process.exit.status if process is not None and process.exit is not None else "ended"
                self._died = CellEnd(type="end", execution_count=0)
                lost = f"the code interpreter {status}; its state is lost"
                return CellError(type="error", name="KernelDied", value=lost, traceback="")
            try:
                return _events.validate_json(line)
            except ValidationError:
                continue

    async def _ensure_started(self) -> None:
        if self._process is not None and self._process.exit is None:
            return
        await self._stop()
        process = await self._sandbox.start([*KERNEL, self.language], cwd=self.cwd, stdin=True, listed=False)
        self._output = self._stack.enter_context(process.subscribe())
        process.start()
        self._process = process
        with anyio.fail_after(START_TIMEOUT_S):
            while (line := await self._next_line()) != b"":
                if line.startswith(b'{"type": "ready"'):
                    return
        raise SandboxError("the code interpreter ended before it was ready")

    async def _stop(self) -> None:
        process, self._process = self._process, None
        self._stack.close()
        self._stack = contextlib.ExitStack()
        self._output = None
        self._lines = Lines(MAX_LINE_BYTES)
        self._ready.clear()
        if process is not None and process.exit is None:
            with contextlib.suppress(SandboxError):
                await process.signal(signal.SIGKILL)

    async def _send(self, request: dict[str, Any]) -> None:
        assert self._process is not None
        await self._process.send_stdin(json.dumps(request).encode() + b"\n")

    async def _next_line(self) -> bytes:
        """The kernel's next line of output (a line longer than ``MAX_LINE_BYTES`` is dropped);
        b"" once it has ended."""
        while True:
            if self._ready:
                return self._ready.popleft() or b" "
            if self._output is None:
                return b""
            try:
                chunk = await self._output.receive()
            except anyio.EndOfStream:
                return b""
            if chunk.stream == "stdout":
                self._ready.extend(self._lines.feed(chunk.data))
