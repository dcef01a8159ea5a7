"""How an observed output is compared with an expected one. Runs on the host only.

Two comparators:

``standard`` (the default)
    Standard input tests: the output and the expected text are split into lines; trailing
    whitespace on each line and trailing empty lines are ignored; both must have the same
    number of lines; within a line, tokens (separated by any whitespace) must be equal, case
    included, except that a numeric token matches a number of the same value: exactly when the
    expected token is an integer (``5.0`` matches ``5``; ``4.9999999`` does not), and within
    ``TOLERANCE`` (absolute or relative, whichever is larger) when it has a fraction or an
    exponent. Only ASCII digits make numbers. Numbers are compared as exact decimals, never
    through a float (which would make ``1e400`` equal ``2e400``), and in time linear in their
    length.
    Call tests: the returned value, converted to JSON as ``json.dumps`` would (tuples become
    lists, dict keys become strings), must equal the expected JSON value; booleans are not
    numbers; an integer expected value is matched exactly (``2.0`` matches ``2``), a float one
    within ``TOLERANCE``; NaN equals nothing. A value with no JSON form (a set, bytes, an
    object) is a wrong answer.

``prime``
    Exactly the reference's comparison (verl ``prime_code`` / ColossalAI ``run_test``), quirks
    included (``_prime_compare``; docs/prime-compat.md).

An :class:`OutputMatch` instead of a name sets the rule's parts, as judges let problem setters
do: the ``layout`` (``lines`` as above; ``tokens``: the same tokens in the same order, wherever
the line breaks fall; ``unordered_lines``: the same lines in any order, each line's tokens
compared as text; ``exact``: the same text), the float tolerances (``abs_tol``, ``rel_tol``:
a non-integer number matches within either), and ``case_sensitive``. ``standard`` is
``OutputMatch()``.
"""

from __future__ import annotations

import decimal
import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..harness.codec import Typed

__all__ = [
    "TOLERANCE",
    "Comparator",
    "ComparatorName",
    "Comparison",
    "OutputMatch",
    "clip",
    "match_call",
    "match_output",
    "show",
]

TOLERANCE = 1e-6


class OutputMatch(BaseModel):
    """How an output matches the expected one: the standard rule's parts, each settable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    layout: Literal["lines", "tokens", "unordered_lines", "exact"] = "lines"
    abs_tol: float = Field(TOLERANCE, ge=0, le=1e300, description="a non-integer number matches this close")
    rel_tol: float = Field(TOLERANCE, ge=0, le=1, description="or this close, relative to the larger")
    case_sensitive: bool = True


ComparatorName = Literal["standard", "prime"]
Comparator = ComparatorName | OutputMatch
STANDARD = OutputMatch()
# Possessive quantifiers: a token that is not a number fails in linear time, never by backtracking.
# ASCII digits only: Unicode's other digits (١٢٣, １２３, 𝟏𝟐𝟑) are text, as every judge reads them.
_INTEGER = re.compile(r"[+-]?+\d++", re.ASCII)
_NUMBER = re.compile(r"[+-]?+(?:\d++(?:\.\d*+)?+|\.\d++)(?:[eE][+-]?+\d++)?+", re.ASCII)
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


def _tokens_equal(got: str, want: str, rule: OutputMatch = STANDARD) -> bool:
    if got == want or (not rule.case_sensitive and got.casefold() == want.casefold()):
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
    relative = _WIDE.multiply(largest, decimal.Decimal(repr(rule.rel_tol)))
    return difference <= max(relative, decimal.Decimal(repr(rule.abs_tol)))


def _close(got: int | float, want: float, rule: OutputMatch = STANDARD) -> bool:
    """``got`` within the rule's tolerance of the float ``want``; an integer too large for a float is not."""
    try:
        value = float(got)
    except OverflowError:
        return False
    if math.isinf(value) or math.isinf(want):
        return value == want
    if math.isnan(value) or math.isnan(want):
        return False
    return math.isclose(value, want, rel_tol=rule.rel_tol, abs_tol=rule.abs_tol)


def match_output(actual: str, expected: str, rule: OutputMatch = STANDARD) -> Comparison:
    """Whether ``actual`` matches ``expected`` under ``rule``; where it first differs if not."""
    if rule.layout == "exact":
        same = actual == expected or (not rule.case_sensitive and actual.casefold() == expected.casefold())
        return Comparison(True) if same else Comparison(False, _first_difference(actual, expected))
    if rule.layout == "tokens":
        got_tokens, want_tokens = actual.split(), expected.split()
        for number, (got_token, want_token) in enumerate(zip(got_tokens, want_tokens, strict=False), start=1):
            if not _tokens_equal(got_token, want_token, rule):
                return Comparison(False, clip(f"token {number}: expected {want_token!r}, got {got_token!r}"))
        if len(got_tokens) != len(want_tokens):
            return Comparison(False, f"expected {len(want_tokens)} tokens, got {len(got_tokens)}")
        return Comparison(True)
    got, want = _lines(actual), _lines(expected)
    if rule.layout == "unordered_lines":
        missing = Counter(_line_key(line, rule) for line in want) - Counter(_line_key(line, rule) for line in got)
        if missing or len(got) != len(want):
            example = f"; missing {next(iter(missing))!r}" if missing else ""
            return Comparison(False, clip(f"expected {len(want)} lines in any order, got {len(got)}{example}"))
        return Comparison(True)
    for number, (got_line, want_line) in enumerate(zip(got, want, strict=False), start=1):
        got_tokens, want_tokens = got_line.split(), want_line.split()
        same = len(got_tokens) == len(want_tokens) and all(
            _tokens_equal(g, w, rule) for g, w in zip(got_tokens, want_tokens, strict=True)
        )
        if not same:
            return Comparison(False, clip(f"line {number}: expected {want_line!r}, got {got_line!r}"))
    if len(got) != len(want):
        return Comparison(False, f"expected {len(want)} lines, got {len(got)}")
    return Comparison(True)


def _line_key(line: str, rule: OutputMatch) -> str:
    key = " ".join(line.split())
    return key if rule.case_sensitive else key.casefold()


def _first_difference(actual: str, expected: str) -> str:
    at = next((i for i, (a, b) in enumerate(zip(actual, expected, strict=False)) if a != b), None)
    if at is None:
        return f"expected {len(expected)} characters, got {len(actual)}"
    return clip(f"at character {at}: expected {expected[at : at + 20]!r}, got {actual[at : at + 20]!r}")


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


def _json_equal(got: Any, want: Any, rule: OutputMatch = STANDARD) -> bool:
    if isinstance(got, bool) or isinstance(want, bool):
        return type(got) is type(want) and got == want
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        if isinstance(want, int):
            # An integer answer is matched exactly; Python compares ints and floats exactly.
            return got == want
        return _close(got, want, rule)
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(_json_equal(g, w, rule) for g, w in zip(got, want, strict=True))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(_json_equal(got[k], want[k], rule) for k in got)
    if isinstance(got, str) and isinstance(want, str) and not rule.case_sensitive:
        return got.casefold() == want.casefold()
    return type(got) is type(want) and got == want


def match_call(returned: Any, expected: Any, rule: OutputMatch = STANDARD) -> Comparison:
    try:
        got = _json_value(returned)
        want = _json_value(expected)
    except _NoJson as exc:
        return Comparison(False, f"{exc}; expected {clip(show(expected))}")
    if _json_equal(got, want, rule):
        return Comparison(True)
    return Comparison(False, clip(f"expected {show(want)}, got {show(got)}"))
