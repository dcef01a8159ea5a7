"""``reward_kit.rewards.deepcoder_reward`` (reward-kit 0.4.1): all or nothing over a test list,
every program in a sandbox."""

from __future__ import annotations

from typing import Any

from ._models import EvaluateResult, Message, MetricResult, metric, reward_function
from .code_execution import _assistant_text, _invalid_response, _run_test_cases, extract_code_blocks

__all__ = ["deepcoder_code_reward"]


@reward_function
def deepcoder_code_reward(
    messages: list[Message],
    ground_truth: list[dict[str, Any]],
    language: str,
    timeout: int = 10,
    environment: str = "local",
    api_key: str | None = None,
    target_function: str | None = None,
    **kwargs: Any,
) -> EvaluateResult:
    """1.0 when the response's code passes every test of ``ground_truth``, else 0.0 (the
    fraction stays in the ``pass_rate`` metric); ``target_function`` selects call mode."""
    text = _assistant_text(messages)
    if text is None:
        invalid = _invalid_response("Invalid or missing assistant response in messages.")
        return invalid.model_copy(update={"is_score_valid": False})
    blocks = extract_code_blocks(text, language)
    if not blocks:
        missing = f"No {language} code block found."
        return EvaluateResult(
            score=0.0, reason=missing, metrics={"error": metric(0.0, False, missing)}, is_score_valid=False
        )
    code = blocks[0]["code"]
    metrics: dict[str, MetricResult] = {"extracted_code": metric(0.0, True, f"Extracted code:\n```\n{code}\n```")}
    if not ground_truth:
        return EvaluateResult(
            score=0.0,
            reason="No test cases provided.",
            metrics={"error": metric(0.0, False, "No test cases provided."), **metrics},
            is_score_valid=False,
        )
    if target_function:
        metrics["target_function_provided"] = metric(0.0, True, f"Using provided target function: {target_function}")
    else:
        metrics["target_function_missing"] = metric(
            0.0, False, "Target function name not provided in input data. Will attempt stdin/stdout."
        )
    tested = _run_test_cases(
        code, language, ground_truth, timeout, environment, api_key, function_to_call=target_function
    )
    final = 1.0 if tested.score == 1.0 else 0.0
    metrics.update(tested.metrics or {})
    overall = "All tests passed." if final == 1.0 else "One or more tests failed or an error occurred."
    metrics["overall_status"] = metric(final, final == 1.0, overall)
    reason = tested.reason if tested.score != 1.0 and tested.reason else overall
    return EvaluateResult(score=final, reason=reason, metrics=metrics, is_score_valid=final == 1.0)
