"""Reading data sets of submissions: the native JSONL layout, APPS/TACO and HumanEval.

Each JSONL record becomes a :class:`Submission`, or a :class:`DatasetError` that says what is
wrong with it; a bad record never stops the others.

- native: the fields of :class:`Submission` (``code``, ``tests``, ...).
- APPS / TACO: ``input_output`` (a JSON string or object with ``inputs``, ``outputs`` and, for
  call-based problems, ``fn_name``) and the code in ``completion``, ``code`` or ``solutions``
  (the first one). Call-based inputs are either argument lists or the one-JSON-value-per-line
  strings of PRIME data; an expected value stored as a one-element list is unwrapped, as
  APPS/TACO store them.
- Every layout takes a ``language`` field (Python when absent, or ``--language``); APPS/TACO
  completions are read from their last fenced block of that language.
- HumanEval: ``prompt`` plus ``completion`` (or ``canonical_solution``), ``test`` and
  ``entry_point``; the test's ``check`` is called with the entry point.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._languages import LANGUAGE_NAMES
from .._limits import Limits
from .._models import Language, safe_text
from .._submission import AssertTest, CallTest, StdinTest, Submission
from . import _published as published
from ._compare import Comparator
from ._record_values import DatasetError, extract_code, integer_text, load_json

__all__ = ["DatasetError", "load_json", "read_submissions", "record_id", "survey", "to_submission"]

LAYOUTS = (
    "native ('code' and 'tests'), APPS/TACO ('input_output'), HumanEval ('prompt', 'test', 'entry_point'),"
    " HumanEval-X ('task_id', 'declaration', 'test'), MBPP ('test_list'), MultiPL-E ('prompt', 'tests' as text),"
    " LiveCodeBench ('public_test_cases'), CodeContests ('public_tests') or BigCodeBench ('complete_prompt', 'test')"
)


def record_id(record: Any, fallback: str) -> str:
    """The record's own name for itself, else ``fallback``."""
    if isinstance(record, dict):
        for key in ("id", "task_id", "problem_id", "question_id", "name"):
            value = record.get(key)
            if isinstance(value, str):
                return safe_text(value)
            if isinstance(value, int) and not isinstance(value, bool):
                return integer_text(value)
    return fallback


def records(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` for every non-blank line of a JSONL file, lazily.

    Lines end at ``\n`` only, as JSON Lines says: a carriage return (or any other character
    that ``str.splitlines`` would take for a line end) inside a record is JSON whitespace or
    part of a string, never a second record.
    """
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, line


def parse_record(line: bytes, number: int) -> Any:
    """One JSONL line as JSON; :class:`DatasetError` naming the problem when it is not usable."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"line {number} is not UTF-8 (byte {exc.start}: {exc.reason})") from None
    try:
        return load_json(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"line {number} is not JSON: {exc}") from None
    except RecursionError:
        raise DatasetError(f"line {number} nests arrays or objects too deeply to read") from None
    except ValueError as exc:  # an integer past MAX_INT_DIGITS, say
        raise DatasetError(f"line {number} cannot be read: {exc}") from None


def read_submissions(
    path: Path,
    *,
    comparator: Comparator = "standard",
    limits: Limits | None = None,
    stop_on_first_failure: bool = False,
    language: Language = "python",
) -> Iterator[tuple[int, str, Submission | DatasetError]]:
    """Yield ``(line number, id, submission or error)`` for every non-blank line, lazily.
    ``language`` is that of records that do not name one."""
    for number, line in records(path):
        try:
            record = parse_record(line, number)
        except DatasetError as exc:
            yield number, f"line-{number}", exc
            continue
        identity = record_id(record, f"line-{number}")
        try:
            yield (
                number,
                identity,
                to_submission(
                    record,
                    identity,
                    comparator=comparator,
                    limits=limits,
                    stop_on_first_failure=stop_on_first_failure,
                    language=language,
                ),
            )
        except DatasetError as exc:
            yield number, identity, exc


def to_submission(
    record: Any,
    identity: str,
    *,
    comparator: Comparator = "standard",
    limits: Limits | None = None,
    stop_on_first_failure: bool = False,
    language: Language = "python",
) -> Submission:
    """One record in any supported layout, as a submission; :class:`DatasetError` if it cannot be.
    A record's own ``language`` field wins over ``language``."""
    if not isinstance(record, dict):
        raise DatasetError(f"a record must be a JSON object, not {type(record).__name__}")
    defaults: dict[str, Any] = {
        "comparator": comparator,
        "stop_on_first_failure": stop_on_first_failure,
        "language": record.get("language", language),
    }
    if limits is not None:
        defaults["limits"] = limits
    try:
        if isinstance(record.get("tests"), str) and "prompt" in record:
            return published.multipl_e(record, identity, defaults)
        if "tests" in record:
            return Submission.model_validate({**defaults, **record, "id": identity})
        if "input_output" in record:
            return _apps(record, identity, defaults)
        if published.is_humaneval_x(record):
            return published.humaneval_x(record, identity, defaults)
        if "code_prompt" in record or "complete_prompt" in record:
            return published.bigcodebench(record, identity, defaults)
        if "test" in record and "entry_point" in record:
            return _humaneval(record, identity, defaults)
        if "test_list" in record:
            return published.mbpp(record, identity, defaults)
        if "public_test_cases" in record or "private_test_cases" in record:
            return published.livecodebench(record, identity, defaults)
        if any(field in record for field in ("public_tests", "private_tests", "generated_tests")):
            return published.code_contests(record, identity, defaults)
    except ValidationError as exc:
        raise DatasetError(_describe(exc)) from None
    except RecursionError:
        raise DatasetError("the record nests values too deeply to judge") from None
    except DatasetError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a record holds, it is that record's error, never the run's
        raise DatasetError(f"the record cannot be read: {type(exc).__name__}: {exc}") from None
    raise DatasetError(f"cannot tell the layout: expected {LAYOUTS}; got keys {sorted(record)[:10]}")


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors()[:5]:
        where = ".".join(str(part) for part in error["loc"]) or "record"
        problems.append(f"{where}: {error['msg']}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(problems) + more


def _apps(record: dict[str, Any], identity: str, defaults: dict[str, Any]) -> Submission:
    spec = record["input_output"]
    if isinstance(spec, str):
        try:
            spec = load_json(spec)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"input_output is not valid JSON: {exc}") from None
    if (
        not isinstance(spec, dict)
        or not isinstance(spec.get("inputs"), list)
        or not isinstance(spec.get("outputs"), list)
    ):
        raise DatasetError("input_output needs 'inputs' and 'outputs' lists")
    inputs, outputs = spec["inputs"], spec["outputs"]
    if len(inputs) != len(outputs):
        raise DatasetError(f"input_output has {len(inputs)} inputs but {len(outputs)} outputs")
    code = _apps_code(record)
    fn_name = spec.get("fn_name")
    if fn_name:
        tests = [
            _call_test(i, value, expected) for i, (value, expected) in enumerate(zip(inputs, outputs, strict=True))
        ]
        return Submission(id=identity, code=code, tests=tests, fn_name=fn_name, **defaults)
    stdin_tests = [
        StdinTest(input=_text(value, f"input {i}"), expected_output=_text(expected, f"output {i}"))
        for i, (value, expected) in enumerate(zip(inputs, outputs, strict=True))
    ]
    return Submission(id=identity, code=code, tests=stdin_tests, **defaults)


def _apps_code(record: dict[str, Any]) -> str:
    if isinstance(record.get("completion"), str):
        return extract_code(record["completion"], str(record.get("language", "python")))
    if isinstance(record.get("code"), str):
        return str(record["code"])
    solutions = record.get("solutions")
    if isinstance(solutions, str):
        try:
            solutions = load_json(solutions)
        except json.JSONDecodeError:
            solutions = [solutions]
    if isinstance(solutions, list) and solutions and isinstance(solutions[0], str):
        return solutions[0]
    raise DatasetError("no code: expected 'completion', 'code' or a non-empty 'solutions'")


def _text(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    raise DatasetError(f"{what} must be a string or a list of lines, not {type(value).__name__}")


def _call_test(index: int, value: Any, expected: Any) -> CallTest:
    if isinstance(value, str):
        try:
            arguments = [load_json(line) for line in value.split("\n") if line.strip()]
        except json.JSONDecodeError as exc:
            raise DatasetError(f"input {index} is not one JSON value per line: {exc}") from None
    elif isinstance(value, list):
        arguments = value
    else:
        raise DatasetError(f"input {index} must be an argument list or JSON lines, not {type(value).__name__}")
    if isinstance(expected, str):
        # PRIME data stores JSON text; anything else is the expected string itself.
        with contextlib.suppress(json.JSONDecodeError):
            expected = load_json(expected)
    elif isinstance(expected, list) and len(expected) == 1:
        expected = expected[0]
    return CallTest(args=arguments, expected=expected)


def _humaneval(record: dict[str, Any], identity: str, defaults: dict[str, Any]) -> Submission:
    entry = record["entry_point"]
    prompt = record.get("prompt", "")
    body = record.get("completion", record.get("canonical_solution"))
    if not isinstance(body, str) or not isinstance(prompt, str) or not isinstance(record["test"], str):
        raise DatasetError("HumanEval records need string 'prompt', 'test' and 'completion' or 'canonical_solution'")
    # The prompt's helpers are the test's too (HumanEval/38 checks decode_cyclic through the
    # prompt's encode_cyclic): given to the test code as a trusted prelude, a completion that
    # redefines them changes its own behaviour only. A prompt that is not a whole program on
    # its own cannot be one; then the helpers come from the program.
    prelude = prompt if published.is_program(prompt) else ""
    test = AssertTest(code=f"{record['test']}\n\ncheck({entry})\n", prelude=prelude)
    return Submission(id=identity, code=prompt + body, tests=[test], entry_point=entry, **defaults)


def survey(path: Path, default: Language) -> tuple[int, set[Language]]:
    """How many records a data set holds, and the languages they name (``default`` where none),
    their checkers' and interactors' included."""
    count, languages = 0, set[Language]()
    for number, line in records(path):
        count += 1
        with contextlib.suppress(ValueError):
            record = parse_record(line, number)
            named: list[object] = [default]
            if isinstance(record, dict):
                named = [published.language_of(record) or record.get("language", default)]
                judges = (record.get(field) for field in ("checker", "interactor"))
                named += [judge.get("language", "python") for judge in judges if isinstance(judge, dict)]
            languages.update(name for name in named if isinstance(name, str) and name in LANGUAGE_NAMES)
    return count, languages or {default}
