"""The reference's comparison (verl 0.9 ``prime_code`` / ColossalAI ``run_test``), quirks
included, on the host: the stdin cascade of whole-text, per-line and single-float-per-line
passes, and for calls Python ``==`` with the ``expected[0]`` rule, top-level tuples as lists,
and integer dict keys (docs/prime-compat.md). Used by ``prime_code`` and by the core judge's
``comparator="prime"``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..harness.codec import Typed
from ._compare import Comparison, clip, show

__all__ = [
    "normalise_prime_expected",
    "prime_call",
    "prime_call_comparison",
    "prime_json_text",
    "prime_stdout",
    "prime_stdout_comparison",
]


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


def prime_stdout_comparison(actual: str, expected: str) -> Comparison:
    if prime_stdout(actual, expected):
        return Comparison(True)
    return Comparison(False, clip(f"expected {expected!r}, got {actual!r}"))


def prime_call_comparison(returned: Any, expected: Any) -> Comparison:
    outcome = prime_call(returned, normalise_prime_expected(expected))
    if outcome.passed or outcome.error:
        return outcome
    return Comparison(False, clip(f"expected {show(expected)}, got {show(returned)}"))
