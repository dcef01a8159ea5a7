"""``reward_kit.rewards.apps_coding_reward`` (reward-kit 0.4.1): APPS problems scored by the
fraction of tests passed before the first failure, every program in a sandbox.

reward-kit runs its own variant of the APPS ``run_test`` in a forked child of the caller, in
process, with no limits. Here the sandbox executes the program the same way (the harness's
``prime`` mode, ``reward_kit_apps`` flavour: the same reshaping into ``def code():``, the same
patched standard input, the output captured in the process) and reports what it observed; the
comparison, the early stop and the result's assembly are replayed on the host, which alone
holds the expected outputs. The container runs every test: were it stopped at the first wrong
answer, the program would learn that its answer was wrong.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from ... import EngineError, NotJudged
from ...lowlevel import HarnessRequest, HarnessRun, PrimeOptions, RunEnd, Status, backstop_s, limit_fields
from .._shared import seconds_left
from ._engine import close, configure
from ._engine import shared as _shared
from ._models import EvaluateResult, Message, MetricResult, metric, reward_function

__all__ = ["close", "configure", "evaluate_apps_solution"]

_GLOBAL_TIMEOUT = {
    "error": "Global timeout or process killed prematurely",
    "details": "No results returned from subprocess.",
}
# reward-kit's per-step alarm: 0 means none, and then only its one-second grace holds the run.
_NO_STEP_LIMIT_S = 3600.0


def _truncate(text: Any, length: int = 300) -> str:
    """reward-kit's ``truncatefn``, which fails on anything but a string."""
    if not isinstance(text, str):
        raise AssertionError
    if len(text) <= length:
        return text
    return text[: length // 2] + "...(truncated) ..." + text[-length // 2 :]


def _extract_python_code(response_content: str) -> str | None:
    """The program in a response: ``<think>`` blocks removed, then the first ```` ```python ````
    block, the first fenced block of any kind, the text from the first ``def `` on, or all of it."""
    cleaned = re.sub(r"<think>[\s\S]*?</think>", "", response_content, flags=re.IGNORECASE).strip()
    if cleaned != response_content.strip() and not cleaned:
        return None
    match = re.search(r"```python\s*(.*?)\s*```", cleaned, re.DOTALL) or re.search(
        r"```\s*(.*?)\s*```", cleaned, re.DOTALL
    )
    if match:
        return match.group(1).strip()
    def_index = cleaned.find("def ")
    if def_index != -1:
        return cleaned[def_index:].strip()
    return cleaned


def _same_output(output: str, expected: str) -> bool:
    """reward-kit's comparison: stripped lines equal, or as many lines that all read as floats and
    are close (``numpy.allclose``: within 1e-8 + 1e-5 * |expected|; equal infinities match)."""
    got = [line.strip() for line in output.splitlines()]
    want = [line.strip() for line in expected.splitlines()]
    if got == want:
        return True
    if len(got) != len(want):
        return False
    try:
        pairs = [(float(a), float(b)) for a, b in zip(got, want, strict=True)]
    except ValueError:
        return False
    return all(
        a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= 1e-8 + 1e-5 * abs(b)) for a, b in pairs
    )


@dataclass
class _Replay:
    """One ``check_correctness`` call replayed on what the sandbox observed."""

    inputs: list[Any]
    outputs: list[Any]
    # Tests whose data reward-kit reads without failing, before the first that makes it raise.
    runnable: int = 0
    results: list[Any] = field(default_factory=list)
    metadata: list[dict[str, Any]] | None = None

    @property
    def count(self) -> int:
        return len(self.inputs)

    def killed(self) -> tuple[list[Any], list[dict[str, Any]]]:
        """reward-kit's outcome when its child died or ran out of time: no result at all."""
        if self.count == 0:
            return [-1], [{"error": "Global timeout"}]
        return [-1] * self.count, [dict(_GLOBAL_TIMEOUT) for _ in range(self.count)]

    def raised(self, error: str) -> tuple[list[Any], list[dict[str, Any]]]:
        trace = f"Traceback (most recent call last):\n{error}\n"
        return [-1] * max(self.count, 1), [{"error": "Exception in _temp_run/run_test", "traceback": trace}]

    def outcome(self, run: HarnessRun) -> tuple[list[Any], list[dict[str, Any]]]:
        for observation in run.observations:
            if observation.status is Status.COMPILE_ERROR:
                error = observation.error
                return [-2], [{"error": error.message if error else "", "traceback": error.traceback if error else ""}]
            if observation.status in (Status.ABORTED, Status.TIMEOUT, Status.MEMORY_LIMIT, Status.OUTPUT_LIMIT):
                return self.killed()
            index = observation.index
            if index >= self.runnable:
                break  # the build's probe: no test could run
            if observation.status is Status.RUNTIME_ERROR:
                error = observation.error
                return [*self.results, -1], [
                    {"error": error.message if error else "", "traceback": error.traceback if error else ""}
                ]
            output = observation.stdout.rstrip()
            if not _same_output(output, self.outputs[index]):
                wrong = {
                    "output": _truncate(output, 200),
                    "expected": _truncate(self.outputs[index], 200),
                    "inputs": _truncate(self.inputs[index]),
                    "error_message": "Wrong Answer",
                }
                return [*self.results, False], [wrong]
            self.results.append(True)
        if run.end in (RunEnd.TIMEOUT, RunEnd.MEMORY_LIMIT):
            return self.killed()
        if run.end is RunEnd.SANDBOX_ERROR:
            raise NotJudged(f"the sandbox failed while running the program: {run.error.message if run.error else ''}")
        if len(self.results) < self.runnable:
            return self.killed()  # the session ended early without saying why: its process died
        if self.runnable < self.count:
            return self.raised("AssertionError")  # reward-kit's truncatefn on a non-string test
        return self.results, [{}]


def _check_correctness(in_outs: Any, generation: str, timeout: Any) -> tuple[list[Any], list[dict[str, Any]]]:
    """reward-kit's ``apps_execution_utils.check_correctness`` in standard-input mode."""
    if not in_outs or "inputs" not in in_outs or not isinstance(in_outs["inputs"], list):
        return [-1], [{"error": "Invalid or missing in_outs structure"}]
    replay = _Replay(inputs=in_outs["inputs"], outputs=in_outs.get("outputs"))
    if not isinstance(timeout, int) or isinstance(timeout, bool):
        return replay.raised(f"TypeError: '{type(timeout).__name__}' object cannot be interpreted as an integer")
    if timeout < 0:
        return replay.killed()  # reward-kit's join returns at once and kills its child
    for index, inputs in enumerate(replay.inputs):
        try:
            expected = replay.outputs[index]
        except (IndexError, KeyError, TypeError) as exc:
            if replay.runnable == 0:
                return replay.raised(f"{type(exc).__name__}: {exc}")
            break
        if not isinstance(inputs, str) or not isinstance(expected, str):
            break
        replay.runnable += 1
    if replay.runnable == 0 and replay.count > 0:
        return replay.raised("AssertionError")
    tests = [{"stdin": text} for text in replay.inputs[: replay.runnable]] or [{"stdin": "", "dry": True}]
    step_s = float(timeout) if timeout > 0 else _NO_STEP_LIMIT_S
    # reward-kit's own child gets its steps' time plus one second in all.
    session_s = max(float(timeout) + 1.0, 1.0)
    # Each step's limit is CPU time (the reference's is wall-clock time) with its backstop.
    limits = _shared.limits.with_time(session_s)
    request = HarnessRequest(
        mode="prime",
        code=generation,
        tests=tests,
        **{
            **limit_fields(limits),
            "time_limit_s": min(step_s, session_s),
            "wall_limit_s": backstop_s(min(step_s, session_s)),
        },
        prime=PrimeOptions(session_limit_s=session_s, flavour="reward_kit_apps"),
    )
    return replay.outcome(_shared.get().run_harness("python", request, limits, deadline_s=seconds_left()))


def _failure(reason: str, metrics: dict[str, MetricResult]) -> EvaluateResult:
    return EvaluateResult(score=0.0, reason=reason, metrics=metrics)


@reward_function
def evaluate_apps_solution(
    messages: list[Message], ground_truth: str | dict[str, Any] | None, **kwargs: Any
) -> EvaluateResult:
    """The fraction of APPS tests the last message's program passes (tests run up to the first
    failure count; a problem's ``fn_name`` is ignored: every program reads standard input)."""
    if not messages:
        return _failure("No messages provided.", {"error": metric(0.0, False, "No messages provided for evaluation.")})
    raw = messages[-1].content
    code = _extract_python_code(raw)  # None raises TypeError, as in reward-kit
    if not code or not code.strip():
        empty = "Empty code solution after extraction."
        return _failure(
            "The provided code solution was empty after extraction.",
            {"parsability": metric(0.0, True, empty), "error": metric(0.0, False, empty)},
        )
    if isinstance(ground_truth, str):
        try:
            in_outs = json.loads(ground_truth)
        except json.JSONDecodeError as exc:
            message = f"Ground_truth JSONDecodeError: {exc}"
            return _failure(message, {"error": metric(0.0, False, message)})
    elif isinstance(ground_truth, dict):
        in_outs = ground_truth
    else:
        return _failure(
            "Invalid ground_truth type.",
            {"error": metric(0.0, False, f"Invalid ground_truth type: {type(ground_truth)}")},
        )
    if not isinstance(in_outs, dict) or "inputs" not in in_outs or "outputs" not in in_outs:
        invalid = "Invalid ground_truth structure after parsing."
        return _failure(invalid, {"error": metric(0.0, False, invalid)})
    for_check = {key: value for key, value in in_outs.items() if key != "fn_name"}
    score = 0.0
    metrics: dict[str, MetricResult] = {}
    try:
        results, metadata = _check_correctness(for_check, code, kwargs.get("execution_timeout", 10))
        if not results:
            reason = "Execution utility returned no results."
            metrics["execution_error"] = metric(0.0, False, reason)
        else:
            passed = sum(1 for result in results if result is True)
            score = passed / len(results)
            reason = f"Passed {passed}/{len(results)} test cases."
            metrics["pass_rate"] = MetricResult(score=score, reason=f"{passed}/{len(results)}")
            metrics["raw_results"] = metric(0.0, False, json.dumps(results))
        if len(metadata) == 1 and metadata[0].get("error"):
            reason += f" Execution Error: {metadata[0]['error']}"
            metrics["execution_error_details"] = metric(0.0, False, json.dumps(metadata[0]))
        elif metadata:
            metrics["execution_metadata"] = metric(0.0, False, json.dumps(metadata))
            if score == 0.0 and metadata[0].get("error_message") == "Wrong Answer":
                first = metadata[0]
                reason += (
                    f". First fail details: Inputs: {first.get('inputs', 'N/A')}, "
                    f"Expected: {first.get('expected', 'N/A')}, Got: {first.get('output', 'N/A')}"
                )
    except EngineError as exc:
        # The sandbox's failure, not the program's: no score (reward-kit's own wording).
        reason = f"Error during code execution or result processing: {type(exc).__name__}: {exc}"
        metrics["evaluation_error"] = metric(0.0, False, reason)
        return EvaluateResult(score=0.0, metrics=metrics, reason=reason, is_score_valid=False)
    return EvaluateResult(score=score, metrics=metrics, reason=reason)
