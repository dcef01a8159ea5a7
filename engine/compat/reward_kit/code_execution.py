"""``reward_kit.rewards.code_execution`` (reward-kit 0.4.1), every program in a sandbox.

The programs run as reward-kit runs them (Python as a file in a fresh interpreter, behind the
same guard prelude; JavaScript inside the same wrapper, with the same Node flags), only in a
container: nothing they do reaches the host. The extraction and comparison helpers are
reward-kit's rules exactly, quirks included (docs/reward-kit-compat.md).
"""

from __future__ import annotations

import ast
import concurrent.futures
import contextvars
import json
import re
import shlex
from collections.abc import Sequence
from typing import Any, Literal

from ... import NotJudged
from ...lowlevel import HarnessRequest, ProcessCommands, RunEnd, Status, limit_fields
from .._shared import seconds_left
from ._engine import close, configure
from ._engine import shared as _shared
from ._models import EvaluateResult, Message, MetricResult, metric, reward_function

__all__ = [
    "close",
    "compare_outputs",
    "configure",
    "execute_javascript_code",
    "execute_python_code",
    "extract_code_blocks",
    "fractional_code_reward",
    "local_code_execution_reward",
    "normalize_output",
    "string_similarity",
]


PYTHON = ("python", "py")
JAVASCRIPT = ("javascript", "js")

# -- extraction and comparison --------------------------------------------------------------------

_FENCE = re.compile(r"```(\w*)\n([\s\S]*?)\n```")
_VERBOSE = (
    (re.compile(r"<think>.*?</think>", re.DOTALL), ""),
    (re.compile(r"<reasoning>.*?</reasoning>", re.DOTALL), ""),
    (re.compile(r"Thinking:\s*.*?(?=\n\S)", re.DOTALL), ""),
    (re.compile(r"^\s*Here's the Python code.*?\n", re.MULTILINE | re.IGNORECASE), ""),
    (re.compile(r"^\s*Okay, here is the code:.*?\n", re.MULTILINE | re.IGNORECASE), ""),
)


def extract_code_blocks(text: str, language: str | None = None) -> list[dict[str, str]]:
    """Fenced blocks (a word-character tag right before the newline), in order; with
    ``language``, only blocks tagged so or untagged; reasoning chatter inside removed."""
    blocks = []
    for tag, body in _FENCE.findall(text):
        if language and tag and language.lower() != tag.lower():
            continue
        cleaned = body
        for pattern, replacement in _VERBOSE:
            cleaned = pattern.sub(replacement, cleaned)
        block = {"language": tag.lower() or "unknown", "code": cleaned.strip()}
        if cleaned != body:
            block["verbosity_cleaned_reason"] = f"Verbose content removed from '{block['language']}' block."
        blocks.append(block)
    return blocks


def normalize_output(output: str) -> str:
    return re.sub(r"\s+", " ", output.strip().replace("\r\n", "\n").replace("\r", "\n"))


def compare_outputs(actual: str, expected: str) -> float:
    """1.0 for the same normalised text; numbers by relative error bands; JSON lists by length
    and best item matches; otherwise the longest common subsequence's share."""
    got, want = normalize_output(actual), normalize_output(expected)
    if got == want:
        return 1.0
    numbers = _floats(got, want)
    if numbers is not None:
        x, y = numbers
        if y == 0:
            return 1.0 if x == 0 else 0.0
        relative = abs(x - y) / abs(y)
        if relative <= 0.001:
            return 1.0
        if relative <= 0.01:
            return 0.9
        if relative <= 0.1:
            return 0.7
        return max(0.0, 1.0 - min(1.0, relative))
    if got.startswith("[") and got.endswith("]") and want.startswith("[") and want.endswith("]"):
        lists = _json_lists(got, want)
        if lists is not None:
            got_items, want_items = lists
            if not got_items and not want_items:
                return 1.0
            length = 1 - min(1, abs(len(got_items) - len(want_items)) / max(1, len(got_items), len(want_items)))
            if not got_items or not want_items:
                items = 0.0
            else:
                best = [max(compare_outputs(str(g), str(w)) for g in got_items) for w in want_items]
                items = sum(best) / len(want_items)
            return 0.3 * length + 0.7 * items
    return string_similarity(got, want)


def _floats(got: str, want: str) -> tuple[float, float] | None:
    try:
        return float(got), float(want)
    except ValueError:
        return None


def _json_lists(got: str, want: str) -> tuple[list[Any], list[Any]] | None:
    try:
        got_value, want_value = json.loads(got), json.loads(want)
    except (json.JSONDecodeError, RecursionError):
        return None
    if isinstance(got_value, list) and isinstance(want_value, list):
        return got_value, want_value
    return None


def string_similarity(first: str, second: str) -> float:
    """The longest common subsequence's length over the longer string's (two rows of the table
    at a time: the same result in linear memory)."""
    if not first and not second:
        return 1.0
    if not first or not second:
        return 0.0
    previous = [0] * (len(second) + 1)
    for char in first:
        current = [0]
        for j, other in enumerate(second, start=1):
            current.append(previous[j - 1] + 1 if char == other else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1] / max(len(first), len(second))


# -- running programs ------------------------------------------------------------------------------

# reward-kit's guard, line for line (29 lines: a traceback's line numbers are the same).
PYTHON_GUARD = """import sys
import os
import signal
import resource
import platform

def _reliability_guard():
    memory_limit = 100 * 1024 * 1024  # 100 MB
    if platform.uname().system != 'Darwin':
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        resource.setrlimit(resource.RLIMIT_DATA, (memory_limit, memory_limit))
        resource.setrlimit(resource.RLIMIT_STACK, (memory_limit, memory_limit))
    import builtins
    builtins.exit = None
    builtins.quit = None
    os.environ['OMP_NUM_THREADS'] = '1'
    os.system = None
    os.popen = None
    os.execl = None
    os.execve = None
    os.fork = None
    os.remove = None
    os.removedirs = None
    os.rmdir = None
    os.unlink = None
    os.access = None

_reliability_guard()

"""
JAVASCRIPT_WRAPPER = """// Safety wrapper to prevent dangerous operations
process.on('uncaughtException', function(err) {
  console.error('Uncaught exception:', err.message);
  process.exit(1);
});

process.exit = function() { console.error('exit() is disabled'); };
process.kill = function() { console.error('kill() is disabled'); };
const fs = require('fs');
const originalFsReadFile = fs.readFileSync;
const originalFsWriteFile = fs.writeFileSync;
fs.readFileSync = function() { console.error('fs.readFileSync() is disabled'); return ''; };
fs.writeFileSync = function() { console.error('fs.writeFileSync() is disabled'); };
const originalRequire = require;
global.require = function(module) {
  const safeModules = ['assert', 'buffer', 'crypto', 'events', 'path', 'querystring',
                      'string_decoder', 'stream', 'timers', 'url', 'util', 'zlib'];
  if (safeModules.includes(module)) {
    return originalRequire(module);
  } else {
    console.error(`Requiring module '${module}' is not allowed for security reasons`);
    return {};
  }
};

try {
  %s
} catch (error) {
  console.error('Code execution error:', error.message);
  process.exitCode = 1;
}
"""
_RUNS = {
    "python": ProcessCommands(source="main.py", run=("python3", "{source}")),
    "javascript": ProcessCommands(
        source="main.js", run=("node", "--no-warnings", "--max-old-space-size=100", "{source}")
    ),
}


def _run(
    language: Literal["python", "javascript"], source: str, timeout: int
) -> tuple[Status | None, str, str, int | None]:
    """One run of ``source`` as a file in a fresh process, in a fresh container: its status (None
    when the sandbox failed), stdout, stderr and exit code."""
    # The reference's timeout is wall-clock time; here CPU time with its wall-clock backstop.
    limits = _shared.limits.with_time(float(timeout))
    request = HarnessRequest(
        runner="process",
        process=_RUNS[language],
        mode="script",
        code=source,
        tests=[{"stdin": ""}],
        **limit_fields(limits),
    )
    run = _shared.get().run_harness(language, request, limits, deadline_s=seconds_left())
    if not run.observations and run.end is RunEnd.SANDBOX_ERROR:
        raise NotJudged(f"the sandbox failed around the program: {run.error.message if run.error else ''}")
    if not run.observations:
        status = Status.TIMEOUT if run.end is RunEnd.TIMEOUT else None
        return status, "", run.error.message if run.error else "", None
    seen = run.observations[0]
    return seen.status, seen.stdout, seen.stderr, seen.exit_code


def execute_python_code(code: str, timeout: int = 5) -> dict[str, Any]:
    """Run ``code`` as reward-kit does: ``{"success", "output" (stripped), "error"}``."""
    if not isinstance(timeout, int) or isinstance(timeout, bool):
        return _failed(f"Setup error: '{type(timeout).__name__}' object cannot be interpreted as an integer\n")
    if timeout <= 0:
        return _failed("")  # reward-kit's CPU limit of 0 s kills the program before it starts
    status, stdout, stderr, _ = _run("python", PYTHON_GUARD + code, timeout)
    if status is Status.OK:
        return {"success": True, "output": stdout.strip(), "error": None}
    if status is Status.TIMEOUT:
        return _failed(f"Execution timed out after {timeout} seconds")
    if status is None:
        return _failed(f"Setup error: {stderr}\n")
    return _failed(stderr.strip())


def execute_javascript_code(code: str, timeout: int = 5) -> dict[str, Any]:
    """Run ``code`` inside reward-kit's JavaScript wrapper: ``{"success", "output", "error"}``."""
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout <= 0:
        return _failed(f"Setup error: timeout must be a positive whole number of seconds, not {timeout!r}\n")
    status, stdout, stderr, exit_code = _run("javascript", JAVASCRIPT_WRAPPER % code.replace("\n", "\n  "), timeout)
    if status is Status.OK:
        return {"success": True, "output": stdout.strip(), "error": None}
    if status is Status.TIMEOUT:
        return _failed(
            f"JavaScript execution timed out after {timeout} seconds (signal.alarm): "
            f"Execution timed out after {timeout} seconds"
        )
    if status is None:
        return _failed(f"Error executing JavaScript code: {stderr}")
    return _failed(stderr.strip() or f"JavaScript process exited with code {exit_code}")


def _failed(error: str) -> dict[str, Any]:
    return {"success": False, "output": None, "error": error}


def _execute(code: str, language: str, timeout: int) -> dict[str, Any] | None:
    """The local executor for ``language``; None for a language it has none for."""
    if language.lower() == "python":
        return execute_python_code(code, timeout)
    if language.lower() in JAVASCRIPT:
        return execute_javascript_code(code, timeout)
    return None


# -- the reward functions ---------------------------------------------------------------------------


def _assistant_text(messages: Sequence[Any]) -> str | None:
    last = messages[-1] if messages else None
    if not isinstance(last, Message) or last.role != "assistant" or last.content is None:
        return None
    return str(last.content)


def _invalid_response(reason: str) -> EvaluateResult:
    return EvaluateResult(
        score=0.0,
        reason=reason,
        metrics={"error": metric(0.0, False, "Last message not a valid assistant response.")},
    )


@reward_function
def local_code_execution_reward(
    messages: list[Message],
    ground_truth: str | None = None,
    language: str = "python",
    timeout: int = 5,
    max_memory_mb: int = 100,
    **kwargs: Any,
) -> EvaluateResult:
    """Run the response's first code block of ``language`` and score its output against
    ``ground_truth`` (1.0 when there is none and it ran)."""
    text = _assistant_text(messages)
    if text is None:
        return _invalid_response("Invalid or missing assistant response in messages.")
    blocks = extract_code_blocks(text, language)
    if not blocks:
        missing = f"No {language} code blocks found in model's response."
        return EvaluateResult(score=0.0, reason=missing, metrics={"error": metric(0.0, False, missing)})
    code = blocks[0]["code"]
    metrics: dict[str, MetricResult] = {
        "extracted_code": metric(0.0, True, f"Extracted code:\n```{language}\n{code}\n```")
    }
    if ground_truth:
        metrics["expected_output"] = metric(0.0, True, f"Expected output:\n{ground_truth}")
    result = _execute(code, language, timeout)
    if result is None:
        unsupported = f"Unsupported language: {language}"
        metrics["error"] = metric(0.0, False, unsupported)
        return EvaluateResult(score=0.0, reason=unsupported, metrics=metrics)
    return _scored(result, ground_truth, metrics, _LOCAL_TEXTS)


_LOCAL_TEXTS = (
    "Execution successful. Output similarity: {similarity:.2f}.",
    "Execution successful. No expected output to compare.",
    "Code execution failed: {error}",
)
_FRACTIONAL_TEXTS = (
    "Fractional code execution successful. Output similarity: {similarity:.2f}.",
    "Fractional code execution successful. No expected output string to compare.",
    "Fractional code execution failed: {error}",
)


def _scored(
    result: dict[str, Any], ground_truth: str | None, metrics: dict[str, MetricResult], texts: tuple[str, str, str]
) -> EvaluateResult:
    compared, alone, failed = texts
    if not result["success"]:
        error = result["error"]
        metrics["execution_result"] = metric(0.0, False, f"Code execution failed with error:\n{error}")
        return EvaluateResult(score=0.0, reason=failed.format(error=error), metrics=metrics)
    output = result["output"]
    metrics["execution_result"] = metric(1.0, True, f"Code executed successfully with output:\n{output}")
    if not ground_truth:
        return EvaluateResult(score=1.0, reason=alone, metrics=metrics)
    similarity = compare_outputs(output, ground_truth)
    metrics["output_match"] = metric(
        similarity,
        similarity == 1.0,
        f"Output similarity: {similarity:.2f}\n\nExpected:\n{ground_truth}\n\nActual:\n{output}",
    )
    return EvaluateResult(score=similarity, reason=compared.format(similarity=similarity), metrics=metrics)


@reward_function
def fractional_code_reward(
    messages: list[Message],
    ground_truth: str | list[dict[str, Any]] | None,
    language: str = "python",
    timeout: int = 30,
    environment: str = "local",
    api_key: str | None = None,
    **kwargs: Any,
) -> EvaluateResult:
    """The fraction of ``ground_truth``'s test cases passed, or (a string) the output's
    similarity to it. ``environment="e2b"`` runs here too: the sandbox is local."""
    text = _assistant_text(messages)
    if text is None:
        return _invalid_response("Invalid or missing assistant response in messages for fractional code reward.")
    expected: str | None = None
    tests: list[dict[str, Any]] | None = None
    if isinstance(ground_truth, str):
        expected = ground_truth
    elif isinstance(ground_truth, list):
        if not all(isinstance(item, dict) for item in ground_truth):
            return EvaluateResult(
                score=0.0,
                reason="Invalid ground_truth format: expected string or list of test case dicts.",
                metrics={"error": metric(0.0, False, "Invalid ground_truth format.")},
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
        missing = f"No {language} code blocks found in model's response"
        return EvaluateResult(
            score=0.0,
            reason=f"{missing} for fractional code reward.",
            metrics={"error": metric(0.0, False, f"{missing}.")},
        )
    code = blocks[0]["code"]
    if tests:
        return _run_test_cases(code, language, tests, timeout, environment, api_key, **kwargs)
    metrics: dict[str, MetricResult] = {
        "extracted_code": metric(0.0, True, f"Extracted code:\n```{language}\n{code}\n```")
    }
    if expected:
        metrics["expected_output"] = metric(0.0, True, f"Expected output:\n{expected}")
    result = _execute(code, language, timeout)
    if result is None:
        if "expected_output" in metrics:
            metrics["expected_output"] = metric(0.0, False, f"Expected output:\n{expected}")
        metrics["error"] = metric(0.0, False, f"Unsupported language: {language}")
        return EvaluateResult(
            score=0.0, reason=f"Unsupported language for fractional code reward: {language}", metrics=metrics
        )
    return _scored(result, expected, metrics, _FRACTIONAL_TEXTS)


# -- test lists ----------------------------------------------------------------------------------------


def _refined(value: Any) -> Any:
    """A string argument as reward-kit reads it: JSON when it looks like a list or object, else a
    float or an int when it parses as one."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith(("[", "{")):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return value
    try:
        return float(text) if "." in text or "e" in text.lower() else int(text)
    except ValueError:
        return value


def _python_arguments(text: str) -> list[Any]:
    text = text.strip()
    if not text:
        return []
    for parse in (json.loads, ast.literal_eval):
        try:
            return [_refined(parse(text))]
        except (ValueError, SyntaxError):
            continue
    try:
        parts = shlex.split(text)
    except ValueError:
        parts = [text]
    arguments = []
    for part in parts:
        try:
            arguments.append(_refined(ast.literal_eval(part)))
        except (ValueError, SyntaxError):
            arguments.append(_refined(part))
    return arguments


def _python_call_program(code: str, test_input: str, function: str) -> str:
    arguments = ", ".join(map(repr, _python_arguments(test_input)))
    return f"""import sys
import json
import traceback

{code}

try:
    result = {function}({arguments})
    print(repr(result))
except Exception as e:
    import traceback
    print(f'Error calling function {function}: {{traceback.format_exc()}}', file=sys.stderr)
    import sys
    sys.exit(1)
"""


def _python_stdin_program(code: str, test_input: str) -> str:
    escaped = json.dumps(test_input)[1:-1].replace("'''", "'\\''\\''\\''")
    return f"""import sys
from io import StringIO

original_stdout = sys.stdout
sys.stdout = captured_stdout = StringIO()
sys.stdin = StringIO('''{escaped}''')

try:
    exec({code!r})
except Exception as e:
    import traceback
    print(f'Error executing script: {{traceback.format_exc()}}', file=sys.stderr)
    import sys
    sys.exit(1)

sys.stdout = original_stdout
print(captured_stdout.getvalue(), end='')
"""


def _javascript_call_program(code: str, test_input: str, function: str) -> str:
    arguments = []
    for token in test_input.strip().split():
        if token.isdigit() or (token.startswith("-") and token[1:].isdigit()):
            arguments.append(token)
        elif "." in token and all(c.isdigit() or c == "." or (i == 0 and c == "-") for i, c in enumerate(token)):
            try:
                float(token)
                arguments.append(token)
            except ValueError:
                arguments.append(json.dumps(token))
        else:
            arguments.append(json.dumps(token))
    return f"""{code}

try {{
    const result = {function}({", ".join(arguments)});
    console.log(JSON.stringify(result));
}} catch (error) {{
    console.error(`Error calling function {function}:`, error);
    process.exitCode = 1;
}}
"""


def _javascript_stdin_program(code: str, test_input: str) -> str:
    lines = json.dumps(test_input.strip().split("\n"))
    return f"""const originalLog = console.log;
let output = '';
console.log = function(...args) {{
  output += args.map(String).join(' ') + '\\n';
}};

const inputs = {lines};
let inputIndex = 0;
const readline = () => inputs[inputIndex++];


try {{
    {code}
}} catch (error) {{
    console.error('Error executing script:', error);
    process.exitCode = 1;
}}

console.log = originalLog;
process.stdout.write(output);
"""


def _run_test_cases(
    code: str,
    language: str,
    test_cases: list[dict[str, Any]],
    timeout: int,
    environment: str,
    api_key: str | None = None,
    function_to_call: str | None = None,
    prompt_for_name_extraction: str | None = None,
    **kwargs: Any,
) -> EvaluateResult:
    """Every test case as a program of its own (its input built into it), each in a fresh
    sandbox, run concurrently; the score is the fraction whose normalised output matches."""
    if not test_cases:
        return EvaluateResult(
            score=0.0,
            reason="No test cases provided",
            metrics={"error": metric(0.0, False, "No test cases provided")},
        )
    python = language.lower() in PYTHON
    if not python and language.lower() not in JAVASCRIPT:
        unsupported = f"Unsupported language for test cases: {language}"
        return EvaluateResult(score=0.0, reason=unsupported, metrics={"error": metric(0.0, False, unsupported)})

    def program(test_input: str) -> str:
        if python:
            if function_to_call:
                return _python_call_program(code, test_input, function_to_call)
            return _python_stdin_program(code, test_input)
        if function_to_call:
            return _javascript_call_program(code, test_input, function_to_call)
        return _javascript_stdin_program(code, test_input)

    def run(test_case: dict[str, Any]) -> dict[str, Any]:
        source = program(test_case.get("input", ""))
        return execute_python_code(source, timeout) if python else execute_javascript_code(source, timeout)

    workers = max(1, min(len(test_cases), _shared.get().settings.max_concurrency))
    with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="airlock-reward-kit") as pool:
        # Each in the caller's context: its deadline (engine.compat._shared) holds in the threads.
        futures = [pool.submit(contextvars.copy_context().run, run, test_case) for test_case in test_cases]
        executions = [future.result() for future in futures]
    results = []
    passed = 0
    for number, (test_case, execution) in enumerate(zip(test_cases, executions, strict=True), start=1):
        expected = test_case.get("expected_output", "")
        record: dict[str, Any] = {
            "test_number": number,
            "input": test_case.get("input", ""),
            "expected_output": expected,
            "passed": False,
            "details": "",
        }
        if execution["success"]:
            output = execution["output"]
            normalized, normalized_expected = normalize_output(output), normalize_output(expected)
            ok = normalized == normalized_expected or (
                python and bool(function_to_call) and normalized == normalize_output(repr(expected))
            )
            record.update(
                passed=ok,
                actual_output=output,
                normalized_actual=normalized,
                normalized_expected=normalized_expected,
                details=f"Passed: {ok}",
            )
            passed += ok
        else:
            record.update(error=execution["error"], details=f"Error: {execution['error']}")
        results.append(record)
    total = len(test_cases)
    score = passed / total
    return EvaluateResult(
        score=score,
        reason=f"{passed}/{total} tests passed.",
        metrics={
            "test_results": metric(score, score == 1.0, json.dumps(results, indent=2)),
            "pass_rate": metric(score, score == 1.0, f"{passed}/{total} tests passed ({score:.2%})"),
        },
    )
