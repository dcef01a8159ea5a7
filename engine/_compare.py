"""How an observed output is compared with an expected one. Runs on the host only.

Two comparators:

``standard`` (the default)
    Standard input tests: the output and the expected text are split into lines; trailing
    whitespace on each line and trailing empty lines are ignored; both must have the same
    number of lines; within a line, tokens (separated by any whitespace) must be equal, case
    included, except that two numeric tokens are equal when their values are: integers
    exactly, anything with a fraction or exponent within ``TOLERANCE`` (absolute or relative,
    whichever is larger).
    Call tests: the returned value, converted to JSON as ``json.dumps`` would (tuples become
    lists, dict keys become strings), must equal the expected JSON value; booleans are not
    numbers, floats compare within ``TOLERANCE``, NaN equals nothing. A value with no JSON form
    (a set, bytes, an object) is a wrong answer.

``prime``
    Exactly the reference's comparison (verl ``prime_code`` / ColossalAI ``run_test``), quirks
    included: the stdin cascade of whole-text, per-line and single-float-per-line passes, and
    for calls Python ``==`` with the ``expected[0]`` rule, top-level tuples as lists, and
    integer dict keys (docs/prime-compat.md).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from .harness.codec import Typed

__all__ = ["TOLERANCE", "Comparator", "Comparison", "compare_call", "compare_stdout"]

Comparator = Literal["standard", "prime"]
TOLERANCE = 1e-6
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_DETAIL_CHARS = 200


@dataclass(frozen=True)
class Comparison:
    """The outcome of one comparison; ``detail`` says where it differs, ``error`` that it could not be made."""

    passed: bool
    detail: str | None = None
    error: str | None = None


def _clip(text: str) -> str:
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 3] + "..."


# -- standard ---------------------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _tokens_equal(got: str, want: str) -> bool:
    if got == want:
        return True
    if not (_NUMBER.fullmatch(got) and _NUMBER.fullmatch(want)):
        return False
    if _INTEGER.fullmatch(got) and _INTEGER.fullmatch(want):
        return int(got) == int(want)
    return _close(float(got), float(want))


def _close(got: float, want: float) -> bool:
    if math.isnan(got) or math.isnan(want):
        return False
    return math.isclose(got, want, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def standard_stdout(actual: str, expected: str) -> Comparison:
    got, want = _lines(actual), _lines(expected)
    for number, (got_line, want_line) in enumerate(zip(got, want, strict=False), start=1):
        got_tokens, want_tokens = got_line.split(), want_line.split()
        same = len(got_tokens) == len(want_tokens) and all(map(_tokens_equal, got_tokens, want_tokens))
        if not same:
            return Comparison(False, _clip(f"line {number}: expected {want_line!r}, got {got_line!r}"))
    if len(got) != len(want):
        return Comparison(False, f"expected {len(want)} lines, got {len(got)}")
    return Comparison(True)


class _NoJson(TypeError):
    pass


def _json_value(value: Any) -> Any:
    """``value`` as ``json.dumps`` would write it and ``json.loads`` read it back."""
    if isinstance(value, Typed):
        # numpy scalars and arrays stand for the numbers and lists they hold.
        if value.base in ("bytes", "set", "frozenset"):
            raise _NoJson(f"a {value.type_name} has no JSON form")
        return _json_value(value.value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {_json_key(k): _json_value(v) for k, v in value.items()}
    raise _NoJson(f"a {type(value).__name__} has no JSON form")


def _json_key(key: Any) -> str:
    key = key.value if isinstance(key, Typed) and key.base in ("bool", "int", "float", "str") else key
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)
    raise _NoJson(f"a dict key of type {type(key).__name__} has no JSON form")


def _json_equal(got: Any, want: Any) -> bool:
    if isinstance(got, bool) or isinstance(want, bool):
        return type(got) is type(want) and got == want
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        if isinstance(got, int) and isinstance(want, int):
            return got == want
        return got == want if math.isinf(got) or math.isinf(want) else _close(float(got), float(want))
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(map(_json_equal, got, want))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(_json_equal(got[k], want[k]) for k in got)
    return type(got) is type(want) and got == want


def standard_call(returned: Any, expected: Any) -> Comparison:
    try:
        got = _json_value(returned)
        want = _json_value(expected)
    except _NoJson as exc:
        return Comparison(False, f"{exc}; expected {_clip(json.dumps(expected, default=repr))}")
    if _json_equal(got, want):
        return Comparison(True)
    return Comparison(False, _clip(f"expected {json.dumps(want)}, got {json.dumps(got)}"))


# -- prime (the reference's rules) -----------------------------------------------------------------


def _digits(value: Any) -> bool:
    return isinstance(value, int) or (isinstance(value, str) and value.isdigit())


def _numpy_isclose(got: float, want: float) -> bool:
    if math.isnan(got) or math.isnan(want):
        return False
    if math.isinf(got) or math.isinf(want):
        return got == want
    return abs(got - want) <= 1e-8 + 1e-5 * abs(want)


def prime_stdout(captured: str, expected: str) -> bool:
    """The reference's cascade for standard-input tests; ``captured`` is what the program printed."""
    lines = captured.splitlines()
    if "\n".join(lines).strip() == expected.strip():
        return True
    if "\n".join(line.strip() for line in lines).strip() == expected.strip():
        return True
    if lines == [expected]:
        return True
    expected_lines = [piece.strip() for piece in expected.split("\n") if piece]
    if lines == expected_lines:
        return True
    nonempty = [line for line in lines if line]
    if nonempty == expected_lines:
        return True
    # One number per line, with numpy.allclose's tolerance, unless every pair is digits only.
    pairs = list(zip(nonempty, expected_lines, strict=False))
    if len(nonempty) == len(expected_lines) and all(_digits(a) and _digits(b) for a, b in pairs):
        return False
    try:
        got = [float(line) for line in nonempty]
        want = [float(line) for line in expected_lines]
    except ValueError:
        return False
    return len(got) == len(want) and all(map(_numpy_isclose, got, want))


def _python(value: Any) -> Any:
    """Builtin values as the reference's process held them, minus the behaviour of foreign types."""
    if isinstance(value, Typed):
        return _python(value.value)
    if isinstance(value, list):
        return [_python(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_python(v) for v in value)
    if isinstance(value, dict):
        return {_python(k): _python(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return type(value)(_python(v) for v in value)
    return value


def prime_json_text(output: Any) -> str:
    """``json.dumps(output)`` as the reference calls it, raising what it would raise."""

    def ready(value: Any) -> Any:
        if isinstance(value, Typed):
            if value.base not in ("bool", "int", "float", "str", "list", "tuple", "dict"):
                raise TypeError(f"Object of type {value.type_name.rsplit('.', 1)[-1]} is not JSON serializable")
            return ready(value.value)
        if isinstance(value, (list, tuple)):
            return [ready(v) for v in value]
        if isinstance(value, dict):
            return {ready(k) if isinstance(k, Typed) else k: ready(v) for k, v in value.items()}
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    return json.dumps(ready(output))


def _numpy_array_size(value: Any) -> int | None:
    """Elements numpy would compare against when broadcasting against ``value``; None if ragged."""
    if not isinstance(value, list):
        return 1
    sizes = [_numpy_array_size(item) for item in value]
    if any(size is None for size in sizes) or len({isinstance(item, list) for item in value}) > 1:
        return None
    if value and isinstance(value[0], list) and len({len(item) for item in value}) > 1:
        return None
    return sum(size or 0 for size in sizes)


def prime_call(output: Any, expected: Any) -> Comparison:
    """The reference's call-based comparison. ``expected`` is already parsed and key-normalised.

    ``error`` is set when the reference itself would have raised inside its test (a value
    ``json.dumps`` refuses, or numpy's ambiguous truth value), which it reports as -1.
    """
    try:
        prime_json_text(output)
    except (TypeError, ValueError) as exc:
        return Comparison(False, error=repr(exc))
    if isinstance(output, Typed) and output.type_name.startswith("numpy."):
        # numpy scalars compare into numpy booleans, never the object True; against a list
        # of several elements the reference's `or` asks an array for its truth and raises.
        size = _numpy_array_size(expected) if isinstance(expected, list) and expected else 1
        if size is None or size > 1:
            message = "The truth value of an array with more than one element is ambiguous."
            return Comparison(False, error=repr(ValueError(message)))
        return Comparison(False, "a numpy scalar never compares as the object True")
    got = _python(output)
    if isinstance(got, tuple):
        got = list(got)
    result = got == expected
    if isinstance(expected, list) and expected:
        result = result or got == expected[0]
    try:
        if isinstance(got[0], tuple):
            result = result or [list(item) for item in got] == expected[0]
    except Exception:  # noqa: BLE001, S110 - the reference ignores every failure of this pass
        pass
    return Comparison(result is True)


def normalise_prime_expected(expected: Any) -> Any:
    """The reference's integer-key rewriting of an expected value (JSON objects have string keys)."""
    try:
        if isinstance(expected, dict):
            expected = [{int(k): v for k, v in expected.items()}]
    except Exception:  # noqa: BLE001, S110 - the reference keeps the value when a key is not an integer
        pass
    try:
        if isinstance(expected[0], dict):
            expected = [{int(k): v for k, v in expected[0].items()}]
    except Exception:  # noqa: BLE001, S110
        pass
    return expected


# -- dispatch ----------------------------------------------------------------------------------------


def compare_stdout(actual: str, expected: str, comparator: Comparator) -> Comparison:
    if comparator == "prime":
        if prime_stdout(actual, expected):
            return Comparison(True)
        return Comparison(False, _clip(f"expected {expected!r}, got {actual!r}"))
    return standard_stdout(actual, expected)


def compare_call(returned: Any, expected: Any, comparator: Comparator) -> Comparison:
    if comparator == "prime":
        outcome = prime_call(returned, normalise_prime_expected(expected))
        if outcome.passed or outcome.error:
            return outcome
        try:
            shown = prime_json_text(returned)
        except (TypeError, ValueError):
            shown = repr(returned)
        return Comparison(False, _clip(f"expected {json.dumps(expected, default=repr)}, got {shown}"))
    return standard_call(returned, expected)
