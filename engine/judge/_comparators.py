"""The comparator a submission names, applied: Airlock's rules (``_compare``) or the reference's,
quirks included (``_prime_compare``)."""

from __future__ import annotations

from typing import Any

from ._compare import STANDARD, Comparator, Comparison, match_call, match_output
from ._prime_compare import prime_call_comparison, prime_stdout_comparison

__all__ = ["compare_call", "compare_stdout"]


def compare_stdout(actual: str, expected: str, comparator: Comparator) -> Comparison:
    if comparator == "prime":
        return prime_stdout_comparison(actual, expected)
    return match_output(actual, expected, STANDARD if comparator == "standard" else comparator)


def compare_call(returned: Any, expected: Any, comparator: Comparator) -> Comparison:
    if comparator == "prime":
        return prime_call_comparison(returned, expected)
    return match_call(returned, expected, STANDARD if comparator == "standard" else comparator)
