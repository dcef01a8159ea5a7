"""``reward_kit.rewards.cpp_code`` (reward-kit 0.4.1): C and C++ rewards, compiled and run in an
Airlock sandbox (the ``cpp`` image, GCC 12) where reward-kit sends them to a Piston server.

The Piston arguments keep their meaning: ``timeout`` (milliseconds) bounds compiling and each
run, ``memory_limit`` (bytes) the container; ``version`` and ``piston_endpoint`` are accepted
and unused. A test list compiles once and runs every test in one container; the results stop
after the first test scoring 0, as reward-kit's loop does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from typing import Any

from ... import Language, Limits, NotJudged
from ...lowlevel import HarnessRequest, Observation, RunEnd, Status, limit_fields, toolchain
from .._shared import seconds_left
from ._engine import close, configure
from ._engine import shared as _shared
from ._models import EvaluateResult, Message, MetricResult, metric, reward_function
from .code_execution import _assistant_text, _invalid_response

__all__ = [
    "TestResult",
    "add_c_includes",
    "add_cpp_includes",
    "binary_cpp_code_reward",
    "close",
    "compare_outputs",
    "configure",
    "execute_cpp_code",
    "extract_code_blocks",
    "ioi_cpp_code_reward",
    "levenshtein_distance",
    "run_cpp_test_cases",
    "string_similarity",
]

_FENCE = re.compile(r"```(\w*)\n([\s\S]*?)\n```")


@dataclasses.dataclass
class TestResult:
    __test__ = False  # not a test class, whatever pytest thinks of the name

    test_name: str
    score: float = 0.0
    status: str = "SKIPPED"
    feedback: str = ""
    actual_output: str = ""
    expected_output: str = ""


def extract_code_blocks(text: str, language: str = "cpp") -> list[dict[str, str]]:
    """Fenced blocks as in ``code_execution``, uncleaned; ``cpp`` keeps ``cpp`` (and ``c++``)
    tags, ``c`` keeps ``c``, anything else its own tag; untagged blocks always."""
    blocks = []
    for tag, body in _FENCE.findall(text):
        tag = tag.lower()
        if language and tag:
            wanted = ("cpp", "c++") if language == "cpp" else (language,)
            if tag not in wanted:
                continue
        blocks.append({"language": tag or "unknown", "code": body.strip()})
    return blocks


def _with_missing(code: str, lines: list[tuple[str, bool]]) -> str:
    missing = [line for line, present in lines if not present]
    return "\n".join(missing) + "\n\n" + code if code and missing else code


def add_cpp_includes(code: str) -> str:
    headers = ("#include <iostream>", "#include <vector>", "#include <string>", "#include <bits/stdc++.h>")
    uses_std = "using namespace std;" in code or "std::" in code
    return _with_missing(code, [*((h, h in code) for h in headers), ("using namespace std;", uses_std)])


def add_c_includes(code: str) -> str:
    headers = ("#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>")
    return _with_missing(code, [(h, h in code) for h in headers])


def compare_outputs(actual: str | None, expected: str | None) -> float:
    """1.0 for the same whitespace-normalised text; numbers by relative error bands (0.95 within
    1%); otherwise one minus the edit distance's share of the longer text."""
    got = re.sub(r"\s+", " ", (actual or "").strip())
    want = re.sub(r"\s+", " ", (expected or "").strip())
    if got == want:
        return 1.0
    try:
        x, y = float(got), float(want)
    except ValueError:
        return string_similarity(got, want)
    if y == 0:
        return 1.0 if x == 0 else 0.0
    relative = abs(x - y) / abs(y)
    if relative <= 0.001:
        return 1.0
    if relative <= 0.01:
        return 0.95
    if relative <= 0.1:
        return 0.7
    return max(0.0, 1.0 - min(1.0, relative))


def string_similarity(first: str, second: str) -> float:
    if not first and not second:
        return 1.0
    if not first or not second:
        return 0.0
    return 1.0 - levenshtein_distance(first, second) / max(len(first), len(second))


def levenshtein_distance(first: str, second: str) -> int:
    if len(first) < len(second):
        first, second = second, first
    previous = list(range(len(second) + 1))
    for i, char in enumerate(first):
        current = [i + 1]
        for j, other in enumerate(second):
            current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (char != other)))
        previous = current
    return previous[-1]


def _judge_runs(
    code: str, stdins: list[str], language: str, timeout_ms: int, memory_limit: int
) -> tuple[str | None, list[Observation]]:
    """Compile once and run once per stdin in one sandbox: a failure before any run (the
    sandbox's), else the observations."""
    name: Language = "c" if language == "c" else "cpp"
    source = add_c_includes(code) if name == "c" else add_cpp_includes(code)
    seconds = max(0.001, timeout_ms / 1000)
    memory_mb = max(64, min(65536, memory_limit // (1 << 20))) if memory_limit > 0 else _shared.limits.memory_mb
    # Piston's time limits are CPU time too, each here with its wall-clock backstop.
    limits = Limits.model_validate({**_shared.limits.with_time(seconds, seconds).model_dump(), "memory_mb": memory_mb})
    request = HarnessRequest(
        runner="process",
        process=toolchain(name).commands_for(source),
        mode="script",
        code=source,
        tests=[{"stdin": stdin} for stdin in stdins],
        **limit_fields(limits),
    )
    run = _shared.get().run_harness(name, request, limits, deadline_s=seconds_left())
    if not run.observations and run.end is RunEnd.SANDBOX_ERROR:
        raise NotJudged(f"the sandbox failed around the program: {run.error.message if run.error else ''}")
    if not run.observations and run.error is not None:
        return run.error.message, []
    return None, run.observations


def _execution(observation: Observation | None, failure: str | None) -> dict[str, Any]:
    """One run as reward-kit's Piston executor words it."""
    if observation is None:
        return {"success": False, "output": None, "error": f"Error: {failure or 'the sandbox failed'}"}
    if observation.status is Status.COMPILE_ERROR:
        message = observation.error.message if observation.error else ""
        return {"success": False, "output": None, "error": f"Compilation error: {message}"}
    if observation.status is Status.OK:
        return {"success": True, "output": observation.stdout, "error": None}
    # Piston reports a killed run (time, memory) without an exit code.
    code = observation.exit_code if observation.status is Status.RUNTIME_ERROR and observation.signal is None else None
    return {
        "success": False,
        "output": observation.stdout or None,
        "error": f"Runtime error (exit code {code}): {observation.stderr}",
    }


async def execute_cpp_code(
    code: str,
    stdin: str = "",
    language: str = "cpp",
    version: str = "11.4.0",
    timeout: int = 5000,  # noqa: ASYNC109 - reward-kit's signature: the sandbox enforces it
    memory_limit: int = 512000000,
    piston_endpoint: str | None = None,
) -> dict[str, Any]:
    failure, seen = await asyncio.to_thread(_judge_runs, code, [stdin], language, timeout, memory_limit)
    return _execution(seen[0] if seen else None, failure)


async def run_cpp_test_cases(
    code: str,
    test_cases: list[dict[str, Any]],
    language: str = "cpp",
    version: str = "11.4.0",
    timeout: int = 5000,  # noqa: ASYNC109 - reward-kit's signature: the sandbox enforces it
    memory_limit: int = 512000000,
    piston_endpoint: str | None = None,
) -> list[TestResult]:
    return await asyncio.to_thread(_test_results, code, test_cases, language, timeout, memory_limit)


def _test_results(
    code: str, test_cases: list[dict[str, Any]], language: str, timeout: int, memory_limit: int
) -> list[TestResult]:
    stdins = [str(case.get("input", "")) for case in test_cases]
    failure, seen = _judge_runs(code, stdins, language, timeout, memory_limit)
    results = []
    for index, case in enumerate(test_cases):
        result = TestResult(
            test_name=case.get("name", f"Test {index + 1}"), expected_output=case.get("expected_output", "")
        )
        execution = _execution(seen[index] if index < len(seen) else None, failure)
        if execution["success"]:
            result.actual_output = execution["output"]
            result.score = compare_outputs(execution["output"], result.expected_output)
            result.status = "AC" if result.score >= 0.99 else "PA" if result.score > 0 else "WA"
            result.feedback = f"Similarity: {result.score:.2f}"
        else:
            result.status = "CE" if "Compilation error" in execution["error"] else "RE"
            result.feedback = execution["error"]
        results.append(result)
        if result.score == 0.0:
            break
    return results


@reward_function
def ioi_cpp_code_reward(
    messages: list[Message],
    ground_truth: str | list[dict[str, Any]] | None,
    language: str = "cpp",
    version: str = "11.4.0",
    timeout: int = 5000,
    memory_limit: int = 512000000,
    piston_endpoint: str | None = None,
    pass_threshold: float = 0.99,
    **kwargs: Any,
) -> EvaluateResult:
    """The share of tests passed (a test passes at ``pass_threshold`` similarity), or the output's
    similarity to a string ``ground_truth``."""
    return _graded(messages, ground_truth, language, timeout, memory_limit, pass_threshold)


def _graded(
    messages: list[Message],
    ground_truth: str | list[dict[str, Any]] | None,
    language: str,
    timeout: int,
    memory_limit: int,
    pass_threshold: float,
) -> EvaluateResult:
    """:func:`ioi_cpp_code_reward`'s result; ``NotJudged`` when the sandbox failed around the program."""
    text = _assistant_text(messages)
    if text is None:
        return _invalid_response("Invalid or missing assistant response in messages.")
    expected: str | None = None
    tests: list[dict[str, Any]] | None = None
    if isinstance(ground_truth, str):
        expected = ground_truth
    elif isinstance(ground_truth, list):
        if not all(isinstance(item, dict) for item in ground_truth):
            return EvaluateResult(
                score=0.0,
                reason="Invalid ground_truth format: if list, must be list of test case dicts.",
                metrics={"error": metric(0.0, False, "Invalid ground_truth list format.")},
            )
        tests = ground_truth
    elif ground_truth is not None:
        return EvaluateResult(
            score=0.0,
            reason="Invalid ground_truth format: expected string, list of test case dicts, or None.",
            metrics={"error": metric(0.0, False, "Invalid ground_truth format.")},
        )
    blocks = extract_code_blocks(text, language)
    if not blocks:
        missing = f"No {language} code blocks found in model's response."
        return EvaluateResult(score=0.0, reason=missing, metrics={"error": metric(0.0, False, missing)})
    code = blocks[0]["code"]
    metrics: dict[str, MetricResult] = {
        "extracted_code": metric(0.0, True, f"Extracted code:\n```{language}\n{code}\n```")
    }
    if expected and not tests:
        metrics["expected_output"] = metric(0.0, True, f"Expected output:\n{expected}")
    if tests:
        results = _test_results(code, tests, language, timeout, memory_limit)
        passed = sum(1 for result in results if result.score >= pass_threshold)
        score = passed / len(results) if results else 0.0
        summary = f"{passed}/{len(results)} tests passed ({score:.2%})"
        records = [
            {"test_name": r.test_name, "status": r.status, "score": r.score, "feedback": r.feedback} for r in results
        ]
        metrics["test_results"] = metric(score, score >= pass_threshold, json.dumps(records, indent=2))
        metrics["pass_rate"] = metric(score, score == 1.0, summary)
        return EvaluateResult(score=score, reason=f"{summary}.", metrics=metrics)
    failure, seen = _judge_runs(code, [""], language, timeout, memory_limit)
    execution = _execution(seen[0] if seen else None, failure)
    if not execution["success"]:
        error = execution["error"]
        metrics["execution_result"] = metric(0.0, False, f"Code execution failed with error:\n{error}")
        return EvaluateResult(score=0.0, reason=f"Code execution failed: {error}", metrics=metrics)
    output = execution["output"]
    metrics["execution_result"] = metric(1.0, True, f"Code executed successfully with output:\n{output}")
    if not expected:
        return EvaluateResult(
            score=1.0, reason="Code executed successfully (no expected output for comparison).", metrics=metrics
        )
    similarity = compare_outputs(output, expected)
    metrics["output_match"] = metric(
        similarity,
        similarity >= pass_threshold,
        f"Output similarity: {similarity:.2f}\n\nExpected:\n{expected}\n\nActual:\n{output}",
    )
    return EvaluateResult(
        score=similarity, reason=f"Code executed successfully. Output similarity: {similarity:.2f}.", metrics=metrics
    )


@reward_function
def binary_cpp_code_reward(
    messages: list[Message],
    ground_truth: str | list[dict[str, Any]] | None,
    language: str = "cpp",
    version: str = "11.4.0",
    timeout: int = 5000,
    memory_limit: int = 512000000,
    piston_endpoint: str | None = None,
    pass_threshold: float = 0.99,
    **kwargs: Any,
) -> EvaluateResult:
    """1.0 when :func:`ioi_cpp_code_reward` reaches ``pass_threshold``, else 0.0."""
    graded = _graded(messages, ground_truth, language, timeout, memory_limit, pass_threshold)
    score = graded.score
    binary = 1.0 if score >= pass_threshold else 0.0
    metrics = dict(graded.metrics)
    metrics["binary_result"] = metric(
        binary,
        binary == 1.0,
        f"{'Passed' if binary > 0 else 'Failed'} (threshold: {pass_threshold:.2f}, actual: {score:.2f})",
    )
    return EvaluateResult(
        score=binary,
        reason=f"Binary score based on threshold {pass_threshold:.2f}. Original score: {score:.2f}.",
        metrics=metrics,
    )
