"""The two comparators, on the cases docs/reference.md states."""

from __future__ import annotations

import math

import pytest

from engine.harness.codec import Typed
from engine.judge._comparators import compare_call, compare_stdout
from engine.judge._compare import OutputMatch
from engine.judge._prime_compare import prime_call, prime_stdout


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        ("3\n", "3"),
        ("3   \n\n\n", "3\n"),
        ("1 2\r\n3\r\n", "1 2\n3\n"),
        ("1  2\n", "1 2\n"),
        ("0.3333333\n", "0.33333333\n"),
        ("2.0\n", "2\n"),
        ("1e3\n", "1000\n"),
        ("-0\n", "0\n"),
        ("+7\n", "7\n"),
        ("123456789012345678901234567890\n", "123456789012345678901234567890\n"),
        ("", ""),
        ("", "\n\n"),
    ],
)
def test_standard_stdout_accepts(actual: str, expected: str) -> None:
    assert compare_stdout(actual, expected, "standard").passed


@pytest.mark.parametrize(
    ("actual", "expected", "where"),
    [
        ("YES\n", "yes\n", "line 1"),
        ("1 2\n", "2 1\n", "line 1"),
        ("1\n2\n", "1\n", "lines"),
        ("1\n", "1\n2\n", "lines"),
        ("\n1\n", "1\n", "line 1"),
        ("0.34\n", "0.3333\n", "line 1"),
        ("100000001\n", "100000000\n", "line 1"),
        ("-100000001\n", "-100000000\n", "line 1"),
        ("1 2\n", "1 2 3\n", "line 1"),
        ("nan\n", "nan\n0\n", "lines"),
        ("inf\n", "Infinity\n", "line 1"),
    ],
)
def test_standard_stdout_rejects(actual: str, expected: str, where: str) -> None:
    comparison = compare_stdout(actual, expected, "standard")
    assert not comparison.passed and comparison.detail and where in comparison.detail


def test_standard_numeric_tolerance_is_stated() -> None:
    assert compare_stdout("1.0000005\n", "1.0\n", "standard").passed
    assert not compare_stdout("1.00001\n", "1.0\n", "standard").passed
    assert compare_stdout("1000000.5\n", "1000000.0\n", "standard").passed  # relative for large values
    assert compare_stdout("1e-7\n", "0.0\n", "standard").passed  # absolute near zero


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        ("1.0000005\n", "1\n"),
        ("999999000.0\n", "999999999\n"),
        ("1e+18\n", "1000000000000000012345\n"),
        ("1000000.5\n", "1000000\n"),
        ("1e400\n", "2e400\n"),
        ("9" * 5000 + "\n", "8" + "9" * 4999 + "\n"),
    ],
)
def test_an_integer_answer_gets_no_tolerance(actual: str, expected: str) -> None:
    assert not compare_stdout(actual, expected, "standard").passed


def test_numbers_are_compared_exactly_however_long() -> None:
    digits = "7" * 100_000
    assert compare_stdout(f"{digits}\n", f"{digits}.000\n", "standard").passed
    assert compare_stdout(f"1e999999999999999999 {digits}\n", f"1e999999999999999999 {digits}", "standard").passed
    assert not compare_stdout("1e99999999999999999999\n", "2e99999999999999999999\n", "standard").passed


def test_a_token_that_almost_is_a_number_costs_linear_time() -> None:
    import time

    def cost(token: str) -> float:
        started = time.process_time()
        compare_stdout(token, "1", "standard")
        return time.process_time() - started

    size = 200_000
    benign, pathological = cost("x" * size), cost("1" * size + "x")
    # Quadratic backtracking would make this thousands of times slower, whatever the machine.
    assert pathological < 50 * benign + 0.05


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        ((1, 2), [1, 2]),
        ([(1, 2)], [[1, 2]]),
        ({1: "a"}, {"1": "a"}),
        (2.0, 2),
        (10**30, 10**30),
        (0.1 + 0.2, 0.3),
        (Typed("numpy.int64", 3), 3),
        (Typed("numpy.float64", 1.5, "float"), 1.5),
        (None, None),
        ({"a": [1, {"b": (2,)}]}, {"a": [1, {"b": [2]}]}),
    ],
)
def test_standard_call_accepts(returned: object, expected: object) -> None:
    assert compare_call(returned, expected, "standard").passed


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        (True, 1),
        (1, True),
        ("5", 5),
        ([5], 5),
        (5, [5]),
        ({1, 2}, [1, 2]),
        (b"x", "x"),
        (math.nan, math.nan),
        ([1, 2], [2, 1]),
        ({"a": 1}, {"a": 1, "b": 2}),
        (999999000.0, 999999999),
        (float(10**18), 10**18 + 12345),
        (10**400, 1.5),
        pytest.param(10**5000 + 1, 10**5000, id="5000-digits"),
    ],
)
def test_standard_call_rejects(returned: object, expected: object) -> None:
    assert not compare_call(returned, expected, "standard").passed


def test_prime_keeps_the_reference_quirks() -> None:
    assert prime_call(5, [5, 6, 7]).passed  # the expected[0] rule
    assert prime_call(True, 1).passed  # Python equality
    assert not prime_call(0.1 + 0.2, 0.3).passed  # no tolerance
    assert not prime_call([(1, 2)], [[1, 2]]).passed  # only top-level tuples become lists
    assert prime_call([(1, 2)], [[[1, 2]]]).passed
    assert prime_call({1: 2}, [{1: 2}]).passed
    assert prime_call({1, 2}, [1, 2]).error is not None  # json.dumps refuses a set: -1
    assert not prime_call(Typed("numpy.float64", 1.5, "float"), 1.5).passed
    assert prime_call(Typed("numpy.float64", 1.5, "float"), [1.5, 2.5]).error is not None
    assert prime_stdout("0.333333\n", "0.3333333333")  # one float per line
    assert not prime_stdout("0.333333 1\n", "0.3333333333 1")
    assert not prime_stdout("100000001\n", "100000000")  # digits only: exact
    assert prime_stdout("-100000001\n", "-100000000")  # but a sign gets the tolerance
    assert prime_stdout("a\n\n\nb\n", "a\nb")
    assert not prime_stdout("1  2\n", "1 2")


@pytest.mark.parametrize(
    ("rule", "actual", "expected", "passes"),
    [
        # tokens: the line breaks do not matter, the order does
        ({"layout": "tokens"}, "1\n2 3\n", "1 2\n3", True),
        ({"layout": "tokens"}, "1 3 2", "1 2 3", False),
        ({"layout": "tokens"}, "1 2", "1 2 3", False),
        # unordered lines: any order, each line's tokens as text, as many of each
        ({"layout": "unordered_lines"}, "b 2\na  1\n", "a 1\nb 2\n", True),
        ({"layout": "unordered_lines"}, "a 1\na 1\n", "a 1\nb 2\n", False),
        ({"layout": "unordered_lines"}, "a 1\n", "a 1\na 1\n", False),
        # exact: the same text, trailing whitespace included
        ({"layout": "exact"}, "1 2\n", "1 2\n", True),
        ({"layout": "exact"}, "1 2 \n", "1 2\n", False),
        # tolerances, either one: 0.5 off passes with abs_tol 0.5, and with rel_tol 0.1 of 10
        ({"abs_tol": 0.5, "rel_tol": 0}, "1.5\n", "1.0\n", True),
        ({"abs_tol": 0.4, "rel_tol": 0}, "1.5\n", "1.0\n", False),
        ({"abs_tol": 0, "rel_tol": 0.1}, "10.5\n", "10.0\n", True),
        ({"abs_tol": 0, "rel_tol": 0}, "1.0000001\n", "1.0\n", False),
        # an integer answer stays exact whatever the tolerance
        ({"abs_tol": 10}, "6\n", "5\n", False),
        # case
        ({"case_sensitive": False}, "YES\n", "yes\n", True),
        ({}, "YES\n", "yes\n", False),
        ({"layout": "unordered_lines", "case_sensitive": False}, "B\nA\n", "a\nb\n", True),
    ],
)
def test_output_match_rules(rule: dict[str, object], actual: str, expected: str, passes: bool) -> None:
    comparison = compare_stdout(actual, expected, OutputMatch.model_validate(rule))
    assert comparison.passed is passes, comparison
    assert comparison.passed or comparison.detail


def test_output_match_rules_apply_to_returned_values() -> None:
    loose = OutputMatch(abs_tol=0.01, case_sensitive=False)
    assert compare_call([1.005, "Yes"], [1.0, "YES"], loose).passed
    assert not compare_call([1.005, "Yes"], [1.0, "YES"], "standard").passed
    assert not compare_call(2, 1, loose).passed
