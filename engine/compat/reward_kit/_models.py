"""reward-kit's result types: its own when it is installed (so results are the objects its
callers expect), else pydantic models with the same fields and rules."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from ... import NotJudged

__all__ = ["EvaluateResult", "Message", "MetricResult", "metric", "reward_function"]

try:  # pragma: no cover - which branch runs depends on the environment
    from reward_kit.models import EvaluateResult, Message, MetricResult
except ImportError:  # pragma: no cover

    class Message(BaseModel):  # type: ignore[no-redef]
        role: str
        content: str | None = ""
        name: str | None = None
        tool_call_id: str | None = None
        tool_calls: list[dict[str, Any]] | None = None
        function_call: dict[str, Any] | None = None

    class MetricResult(BaseModel):  # type: ignore[no-redef]
        is_score_valid: bool = True
        score: float = Field(ge=0.0, le=1.0)
        reason: str

    class EvaluateResult(BaseModel):  # type: ignore[no-redef]
        score: float
        is_score_valid: bool = True
        reason: str | None = None
        metrics: dict[str, MetricResult] = Field(default_factory=dict)
        step_outputs: list[Any] | None = None
        error: str | None = None

        def __getitem__(self, key: str) -> Any:
            return getattr(self, key)

        def get(self, key: str, default: Any = None) -> Any:
            return getattr(self, key, default)

        def keys(self) -> list[str]:
            return list(type(self).model_fields)


F = TypeVar("F", bound=Callable[..., Any])


def metric(score: float, valid: bool, reason: str) -> MetricResult:
    return MetricResult(score=score, is_score_valid=valid, reason=reason)


def reward_function(function: F) -> F:
    """What reward-kit's decorator does to these functions' inputs: ``messages`` must be a list
    whose items become :class:`Message` objects. And what reward-kit's results can say that
    their executors cannot: a program the sandbox could not judge (``NotJudged``) gets no score
    (``is_score_valid=False``, with the reason), never the 0 of a wrong program."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        if "messages" in bound.arguments:
            messages = bound.arguments["messages"]
            if not isinstance(messages, list):
                raise ValueError(
                    f"Input 'messages' failed Pydantic validation: Expected a list for 'messages', got {type(messages)}"
                )
            try:
                bound.arguments["messages"] = [m if isinstance(m, Message) else Message(**m) for m in messages]
            except (TypeError, ValidationError) as exc:
                raise ValueError(f"Input 'messages' failed Pydantic validation: {exc}") from None
        try:
            return function(*bound.args, **bound.kwargs)
        except NotJudged as exc:
            reason = f"Not judged: {exc}"
            return EvaluateResult(
                score=0.0, reason=reason, is_score_valid=False, metrics={"error": metric(0.0, False, reason)}
            )

    return wrapper  # type: ignore[return-value]
