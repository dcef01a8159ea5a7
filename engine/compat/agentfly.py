"""A drop-in for AgentFly's ``code_reward_test`` and the Python sandbox resource it runs in::

    from engine.compat.agentfly import code_reward_test   # was: from agentfly.rewards.code_reward import ...

    result = await code_reward_test(prediction="print('Hello, World!')", context=context)
    # {"reward": 1.0, "output": "Hello, World!"}

AgentFly runs the prediction in the rollout's local Python sandbox, which is the host's own
interpreter; here it runs in an Airlock sandbox, one per rollout ``context``, whose state
persists across calls (as a Python sandbox resource's ``step`` does) until the context is
garbage-collected, :func:`release` is called, or it sits idle for ``IDLE_TIMEOUT_S``.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any

import anyio.to_thread

from .. import CellError, CellResult, CellText, EngineError, Limits, SyncEngine
from ._shared import SharedEngine

__all__ = ["CodeError", "PythonSandbox", "close", "code_reward_test", "configure", "release"]

IDLE_TIMEOUT_S = 600
STEP_TIMEOUT_S = 60.0
_shared = SharedEngine(Limits(memory_mb=1024, tmpfs_mb=128))
_lock = threading.Lock()
_by_context: dict[int, PythonSandbox] = {}


def configure(engine: SyncEngine | None) -> None:
    """Make sandboxes with ``engine`` (``None``: one made on first use)."""
    _shared.configure(engine)


def close() -> None:
    """Close the engine this module made, and with it every rollout's sandbox."""
    with _lock:
        _by_context.clear()
    _shared.close()


class CodeError(Exception):
    """The code raised; the message is ``Name: value``, as the resource reports it."""


class PythonSandbox:
    """A Python sandbox resource: :meth:`step` runs code and returns what it printed, keeping
    variables, imports and files from one step to the next."""

    def __init__(self, *, timeout_s: float = IDLE_TIMEOUT_S) -> None:
        self._timeout_s = timeout_s
        self._sandbox = _shared.get().create_sandbox(timeout_s=timeout_s)

    async def step(self, code: str) -> str:
        return await anyio.to_thread.run_sync(self._step, code)

    def _step(self, code: str) -> str:
        self._sandbox.set_timeout(self._timeout_s)
        printed: list[str] = []
        for event in self._sandbox.run_code(code, time_s=STEP_TIMEOUT_S):
            if isinstance(event, CellText):
                printed.append(event.text)
            elif isinstance(event, CellResult) and event.is_main_result:
                printed.append(str(event.data.get("text/plain", "")) + "\n")
            elif isinstance(event, CellError):
                raise CodeError(f"{event.name}: {event.value}")
        return "".join(printed).rstrip("\n")

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self.close)

    def close(self) -> None:
        with contextlib.suppress(EngineError, RuntimeError):
            _shared.get().sandboxes.kill(self._sandbox.id)


def _sandbox_for(context: Any) -> PythonSandbox:
    key = id(context)
    with _lock:
        sandbox = _by_context.get(key)
    if sandbox is None:
        sandbox = PythonSandbox()
        with _lock:
            _by_context[key] = sandbox
        with contextlib.suppress(TypeError):  # a context that takes no weak reference lives until release()
            weakref.finalize(context, _forget, key)
    return sandbox


def _forget(key: int) -> None:
    with _lock:
        sandbox = _by_context.pop(key, None)
    if sandbox is not None:
        sandbox.close()


def release(context: Any) -> None:
    """End the sandbox of a rollout's ``context`` now."""
    _forget(id(context))


async def code_reward_test(prediction: str, context: Any) -> dict[str, Any]:
    """1.0 and what the code printed when it runs without raising; 0.0 and ``Name: value`` when it raises."""
    try:
        sandbox = await anyio.to_thread.run_sync(_sandbox_for, context)
        output = await sandbox.step(prediction)
        return {"reward": 1.0, "output": output}
    except Exception as exc:  # noqa: BLE001 - AgentFly scores every failure 0 with its message
        return {"reward": 0.0, "output": str(exc)}
