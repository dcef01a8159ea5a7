"""How an observed output is compared with an expected one. Runs on the host only.

Two comparators:

``standard`` (the default)
    Standard input tests: the output and the expected text are split into lines; trailing
    whitespace on each line and trailing empty lines are ignored; both must have the same
    number of lines; within a line, tokens (separated by any whitespace) must be equal, case
    included, except that a numeric token matches a number of the same value: exactly when the
    expected token is an integer (``5.0`` matches ``5``; ``4.9999999`` does not), and within
    ``TOLERANCE`` (absolute or relative, whichever is larger) when it has a fraction or an
    exponent. Numbers are compared as exact decimals, never through a float (which would make
    ``1e400`` equal ``2e400``), and in time linear in their length.
    Call tests: the returned value, converted to JSON as ``json.dumps`` would (tuples become
    lists, dict keys become strings), must equal the expected JSON value; booleans are not
    numbers; an integer expected value is matched exactly (``2.0`` matches ``2``), a float one
    within ``TOLERANCE``; NaN equals nothing. A value with no JSON form (a set, bytes, an
    object) is a wrong answer.

``prime``
    Exactly the reference's comparison (verl ``prime_code`` / ColossalAI ``run_test``), quirks
    included; it lives with the drop-in that needs it, ``engine.compat._prime_compare``
    (docs/prime-compat.md).
"""

from __future__ import annotations

import decimal
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from .harness.codec import Typed

__all__ = ["TOLERANCE", "Comparator", "Comparison", "clip", "compare_call", "compare_stdout", "show"]

Comparator = Literal["standard", "prime"]
TOLERANCE = 1e-6
# Possessive quantifiers: a token that is not a number fails in linear time, never by backtracking.
_INTEGER = re.compile(r"[+-]?+\d++")
_NUMBER = re.compile(r"[+-]?+(?:\d++(?:\.\d*+)?+|\.\d++)(?:[eE][+-]?+\d++)?+")
# Exponents as large as decimals allow, so that no sum or product overflows on the way.
_WIDE = decimal.Context(prec=50, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[])
_DETAIL_CHARS = 200


@dataclass(frozen=True)
class Comparison:
    """The outcome of one comparison; ``detail`` says where it differs, ``error`` that it could not be made."""

    passed: bool
    detail: str | None = None
    error: str | None = None


def clip(text: str) -> str:
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 3] + "..."


# Integers of more bits than this are shown by their size: writing them out in decimal takes
# time quadratic in their length, and Python refuses beyond 4300 digits.
_SHOWN_INT_BITS = 256


def show(value: Any) -> str:
    """A short JSON-like rendering of any value a test returned or expected, for messages."""
    return clip(json.dumps(_showable(value), ensure_ascii=False, default=repr))


def _showable(value: Any) -> Any:
    if isinstance(value, Typed):
        return _showable(value.value)
    if isinstance(value, bool) or value is None or isinstance(value, (str, float)):
        return value
    if isinstance(value, int):
        if value.bit_length() <= _SHOWN_INT_BITS:
            return value
        return f"<integer of {int(value.bit_length() * 0.30103) + 1} digits>"
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_showable(item) for item in list(value)[:20]]
    if isinstance(value, dict):
        return {str(_showable(key)): _showable(item) for key, item in list(value.items())[:20]}
    return repr(value)[:_DETAIL_CHARS]


# -- standard ---------------------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _tokens_equal(got: str, want: str) -> bool:
    if got == want:
        return True
    if not (_NUMBER.fullmatch(want) and _NUMBER.fullmatch(got)):
        return False
    try:
        got_value, want_value = decimal.Decimal(got), decimal.Decimal(want)
    except decimal.InvalidOperation:  # an exponent beyond any decimal's: compared as text, above
        return False
    if _INTEGER.fullmatch(want):
        return got_value == want_value
    difference = _WIDE.subtract(got_value, want_value).copy_abs()
    largest = max(got_value.copy_abs(), want_value.copy_abs())
    return difference <= max(_WIDE.multiply(largest, _TOLERANCE), _TOLERANCE)


_TOLERANCE = decimal.Decimal(str(TOLERANCE))


def _close(got: int | float, want: float) -> bool:
    """``got`` within ``TOLERANCE`` of the float ``want``; an integer too large for a float is not."""
    try:
        value = float(got)
    except OverflowError:
        return False
    if math.isinf(value) or math.isinf(want):
        return value == want
    if math.isnan(value) or math.isnan(want):
        return False
    return math.isclose(value, want, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def standard_stdout(actual: str, expected: str) -> Comparison:
    got, want = _lines(actual), _lines(expected)
    for number, (got_line, want_line) in enumerate(zip(got, want, strict=False), start=1):
        got_tokens, want_tokens = got_line.split(), want_line.split()
        same = len(got_tokens) == len(want_tokens) and all(map(_tokens_equal, got_tokens, want_tokens))
        if not same:
            return Comparison(False, clip(f"line {number}: expected {want_line!r}, got {got_line!r}"))
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
        try:
            return json.dumps(key)
        except ValueError:  # an integer beyond the digits Python writes
            raise _NoJson("an integer dict key too large to write has no JSON form") from None
    raise _NoJson(f"a dict key of type {type(key).__name__} has no JSON form")


def _json_equal(got: Any, want: Any) -> bool:
    if isinstance(got, bool) or isinstance(want, bool):
        return type(got) is type(want) and got == want
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        if isinstance(want, int):
            # An integer answer is matched exactly; Python compares ints and floats exactly.
            return got == want
        return _close(got, want)
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
        return Comparison(False, f"{exc}; expected {clip(show(expected))}")
    if _json_equal(got, want):
        return Comparison(True)
    return Comparison(False, clip(f"expected {show(want)}, got {show(got)}"))


# -- dispatch ----------------------------------------------------------------------------------------


def compare_stdout(actual: str, expected: str, comparator: Comparator) -> Comparison:
    if comparator == "prime":
        from .compat._prime_compare import prime_stdout_comparison

        return prime_stdout_comparison(actual, expected)
    return standard_stdout(actual, expected)


def compare_call(returned: Any, expected: Any, comparator: Comparator) -> Comparison:
    if comparator == "prime":
        from .compat._prime_compare import prime_call_comparison

        return prime_call_comparison(returned, expected)
    return standard_call(returned, expected)
