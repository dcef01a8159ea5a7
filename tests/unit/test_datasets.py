"""Reading data sets: every layout, and every malformed record gets a clear error, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import AssertTest, CallTest, RunTest, StdinTest, Submission
from engine.judge._datasets import DatasetError, read_submissions, survey, to_submission
from engine.judge._finish_line import FinishedLanguage, with_finish_line


def test_native_layout() -> None:
    record = {"code": "print(1)", "tests": [{"kind": "stdin", "input": "", "expected_output": "1"}]}
    submission = to_submission(record, "a")
    assert isinstance(submission.tests[0], StdinTest) and submission.id == "a"


def test_apps_stdin_layout_with_solutions_as_json_string() -> None:
    record = {
        "problem_id": 7,
        "input_output": json.dumps({"inputs": ["1\n", ["2", "3"]], "outputs": ["1\n", ["2", "3"]]}),
        "solutions": json.dumps(["print(input())"]),
    }
    submission = to_submission(record, "7")
    assert submission.code == "print(input())"
    assert [t.input for t in submission.tests] == ["1\n", "2\n3"]  # type: ignore[union-attr]


def test_apps_call_layout_unwraps_expected_values() -> None:
    record = {
        "input_output": {"fn_name": "f", "inputs": [[1, 2], "3\n4"], "outputs": [[3], "7"]},
        "completion": "text\n```python\ndef f(a, b):\n    return a + b\n```\nmore",
    }
    submission = to_submission(record, "x")
    assert submission.fn_name == "f" and submission.code.strip().startswith("def f")
    tests = [t for t in submission.tests if isinstance(t, CallTest)]
    assert [(t.args, t.expected) for t in tests] == [([1, 2], 3), ([3, 4], 7)]


def test_humaneval_layout() -> None:
    record = {
        "task_id": "HumanEval/0",
        "prompt": "def f(x):\n",
        "canonical_solution": "    return x\n",
        "test": "def check(candidate):\n    assert candidate(1) == 1\n",
        "entry_point": "f",
    }
    submission = to_submission(record, "HumanEval/0")
    assert submission.entry_point == "f" and submission.code == "def f(x):\n    return x\n"
    assert isinstance(submission.tests[0], AssertTest) and submission.tests[0].code.endswith("check(f)\n")


@pytest.mark.parametrize(
    ("record", "complaint"),
    [
        ([1, 2], "JSON object"),
        ({"foo": 1}, "cannot tell the layout"),
        ({"code": "x", "tests": []}, "tests"),
        ({"code": "x", "tests": [{"kind": "stdin"}]}, "expected_output"),
        ({"code": "x", "tests": [{"kind": "rpc", "x": 1}]}, "tests.0"),
        ({"code": 5, "tests": [{"kind": "stdin", "expected_output": ""}]}, "code"),
        ({"code": "x", "tests": [{"kind": "call", "args": [], "expected": 1}]}, "fn_name"),
        ({"code": "x", "fn_name": "1bad", "tests": [{"kind": "call", "args": [], "expected": 1}]}, "identifier"),
        (
            {"code": "x", "tests": [{"kind": "stdin", "expected_output": ""}, {"kind": "assert", "code": "1"}]},
            "one kind",
        ),
        ({"code": "x", "tests": [{"kind": "stdin", "expected_output": ""}], "limits": {"memory_mb": -1}}, "memory_mb"),
        ({"code": "x", "tests": [{"kind": "stdin", "expected_output": ""}], "language": "cobol"}, "language"),
        ({"code": "x" * 2_000_000, "tests": [{"kind": "stdin", "expected_output": ""}]}, "code"),
        ({"input_output": "{not json", "code": "x"}, "input_output is not valid JSON"),
        ({"input_output": {"inputs": ["1"], "outputs": []}, "code": "x"}, "1 inputs but 0 outputs"),
        ({"input_output": {"inputs": ["1"], "outputs": ["1"]}}, "no code"),
        ({"input_output": {"fn_name": "f", "inputs": ["{bad"], "outputs": ["1"]}, "code": "x"}, "JSON value per line"),
        ({"input_output": {"inputs": [5], "outputs": ["1"]}, "code": "x"}, "input 0"),
        ({"prompt": 1, "test": "x", "entry_point": "f", "completion": "y"}, "string"),
    ],
)
def test_malformed_records_name_the_problem(record: object, complaint: str) -> None:
    with pytest.raises(DatasetError, match=complaint):
        to_submission(record, "r")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
record_keys = st.sampled_from(
    [
        "code",
        "tests",
        "fn_name",
        "entry_point",
        "input_output",
        "solutions",
        "completion",
        "prompt",
        "test",
        "kind",
        "input",
        "expected_output",
        "args",
        "expected",
        "limits",
        "language",
        "id",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(record_keys, json_values, max_size=6))
def test_any_record_is_a_submission_or_a_clear_error(record: dict[str, object]) -> None:
    try:
        assert isinstance(to_submission(record, "fuzz"), Submission)
    except DatasetError as exc:
        assert str(exc)


def test_reader_yields_one_item_per_non_blank_line(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    good = json.dumps({"id": "g", "code": "print(1)", "tests": [{"kind": "stdin", "expected_output": "1"}]})
    path.write_text(f"{good}\n\nnot json\n{json.dumps({'x': 1})}\n")
    items = list(read_submissions(path))
    assert [(line, identity) for line, identity, _ in items] == [(1, "g"), (3, "line-3"), (4, "line-4")]
    assert isinstance(items[0][2], Submission)
    assert isinstance(items[1][2], DatasetError) and "not JSON" in str(items[1][2])


def test_every_hostile_line_is_one_item_with_a_clear_error(tmp_path: Path) -> None:
    good = {"code": "print(1)", "tests": [{"kind": "stdin", "expected_output": "1"}]}
    lines = [
        json.dumps({**good, "id": "cr"}).replace(', "tests"', ',\r"tests"').encode(),  # a CR between tokens
        json.dumps({**good, "id": "vt\x0bff\x0cls\u2028"}).encode(),  # characters splitlines() splits at
        b'{"id": "digits", "code": "x", "fn_name": "f", "tests": [{"kind": "call", "args": ['
        + b"7" * 5000
        + b'], "expected": 1}]}',
        b'{"id": "too-many-digits", "code": "x", "fn_name": "f", "tests": [{"kind": "call", "args": ['
        + b"7" * 1_000_001
        + b'], "expected": 1}]}',
        b'{"id": "deep", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"id": "bytes", "code": "print(\xff)"}',
        json.dumps({**good, "id": "lone-\ud800"}).encode(),
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    items = list(read_submissions(path))
    assert [line for line, _, _ in items] == [1, 2, 3, 4, 5, 6, 7]
    kinds = [type(item).__name__ for _, _, item in items]
    assert kinds == [
        "Submission",
        "Submission",
        "Submission",
        "DatasetError",
        "DatasetError",
        "DatasetError",
        "Submission",
    ]
    digits = items[2][2]
    assert isinstance(digits, Submission) and digits.tests[0].args == [7 * (10**5000 - 1) // 9]  # type: ignore[union-attr]
    complaints = [str(item) for _, _, item in items[3:6]]
    assert "1000001 digits" in complaints[0] and "too deeply" in complaints[1] and "not UTF-8" in complaints[2]
    assert items[6][1] == "lone-\ufffd"


def test_humaneval_prompt_helpers_are_the_tests_not_the_programs() -> None:
    record = {
        "prompt": "def encode(s):\n    return s[1:] + s[:1]\n\ndef decode(s):\n    '''Undo encode.'''\n",
        "completion": "    return s\n",
        "test": "def check(candidate):\n    assert candidate(encode('ab')) == 'ab'\n",
        "entry_point": "decode",
    }
    test = to_submission(record, "h").tests[0]
    assert isinstance(test, AssertTest) and test.prelude == record["prompt"]
    partial = to_submission({**record, "prompt": "def decode(s):\n    if s:\n"}, "p").tests[0]
    assert isinstance(partial, AssertTest) and partial.prelude == ""  # not a program on its own


class _Runs:
    """Pickled, this would run a command when unpickled."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return (os.system, ("echo unpickled > /tmp/airlock-unpickled",))


def _packed(value: object) -> str:
    import base64
    import pickle
    import zlib

    return base64.b64encode(zlib.compress(pickle.dumps(value))).decode()


@pytest.mark.parametrize(
    "private",
    [_packed(_Runs()), _packed([{"input": "1", "output": "1", "testtype": "stdin", "x": _Runs()}])],
    ids=["object", "nested"],
)
def test_livecodebench_private_tests_unpickle_plain_values_only(private: str) -> None:
    import os

    record = {"question_id": "q", "public_test_cases": "[]", "private_test_cases": private, "completion": "print(1)"}
    with pytest.raises(DatasetError, match="only plain values"):
        to_submission(record, "q")
    assert not os.path.exists("/tmp/airlock-unpickled")


def test_livecodebench_private_tests_that_inflate_without_end_are_refused() -> None:
    import base64
    import zlib

    from engine.judge._published import MAX_INFLATED_BYTES

    bomb = base64.b64encode(zlib.compress(b"\0" * (MAX_INFLATED_BYTES + 1))).decode()
    record = {"question_id": "q", "public_test_cases": "[]", "private_test_cases": bomb, "completion": "print(1)"}
    with pytest.raises(DatasetError, match="inflate beyond"):
        to_submission(record, "q")


def test_mbpp_runs_its_setup_before_the_program_and_as_the_tests_prelude() -> None:
    record = {
        "task_id": 9,
        "code": "def f(n):\n    return n.v\n",
        "test_list": ["assert f(x) == 1"],
        "test_setup_code": "class N:\n    v = 1\nx = N()\n",
        "challenge_test_list": ["assert False"],
    }
    submission = to_submission(record, "9")
    assert submission.code.startswith("class N:") and submission.code.endswith("return n.v\n")
    tests = [(t.code, t.prelude) for t in submission.tests if isinstance(t, AssertTest)]
    assert tests == [("assert f(x) == 1", record["test_setup_code"])]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"task_id": "Rust/1", "declaration": "", "prompt": "", "test": "", "generation": ""}, "rust"),
        ({"name": "x", "language": "cobol", "prompt": "", "tests": "", "completion": ""}, "cobol"),
        ({"name": "x", "public_tests": {"input": ["1"], "output": []}}, "one length"),
        (
            {
                "name": "x",
                "public_tests": {"input": ["1"], "output": ["1"]},
                "solutions": {"language": [1], "solution": ["print 1"]},
            },
            "no solution in a language",
        ),
        (
            {
                "question_id": "q",
                "public_test_cases": '[{"input": "1", "output": "1", "testtype": "functional"}]',
                "completion": "x",
            },
            "func_name",
        ),
        (
            {"task_id": "BigCodeBench/1", "complete_prompt": "def task_func():\n", "test": "", "solution": ""},
            "BigCodeBench's test defines no TestCases",
        ),
    ],
    ids=[
        "humaneval-x-rust",
        "multipl-e-language",
        "code-contests-lengths",
        "code-contests-python2",
        "lcb-no-name",
        "bigcodebench",
    ],
)
def test_published_layouts_say_what_they_cannot_judge(record: dict[str, object], message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        to_submission(record, "r")


def test_bigcodebench_runs_each_test_method_with_a_secret_only_its_driver_reads() -> None:
    record = {
        "task_id": "BigCodeBench/7",
        "complete_prompt": 'import math\n\ndef task_func(n):\n    """Square root."""\n',
        "code_prompt": "import math\n\ndef task_func(n):\n",
        "canonical_solution": "    return math.sqrt(n)\n",
        "test": (
            "import unittest\nclass Base(unittest.TestCase):\n    def test_zero(self):\n        pass\n"
            "class TestCases(Base):\n    def test_four(self):\n        pass\n    def helper(self):\n        pass\n"
        ),
        "entry_point": "task_func",
    }
    canonical = to_submission(record, "c")
    completed = to_submission({**record, "completion": "    return n ** 0.5\n"}, "b")
    assert canonical.language == completed.language == "python"
    for submission in (canonical, completed):
        methods = [t.stdin.split()[1] for t in submission.tests if isinstance(t, RunTest)]
        assert methods == ["test_four", "test_zero"]
        nonces = {t.stdin.split()[0] for t in submission.tests if isinstance(t, RunTest)}
        assert len(nonces) == 1 and not any(nonce in submission.code for nonce in nonces)
        assert all(
            isinstance(t, RunTest) and t.expected_stdout == f"ok {t.stdin.split()[0]}\n" for t in submission.tests
        )
    assert "return math.sqrt(n)" in canonical.code and "\\n    pass\\nimport math" not in canonical.code
    # Calibrated, as BigCodeBench's evaluation is by default: the prompt's imports and signature first.
    assert "def task_func(n):\\n\\n    pass\\nimport math" in completed.code
    assert to_submission(record, "c").tests[0] != canonical.tests[0]


@pytest.mark.parametrize(
    ("language", "test", "complaint"),
    [
        ("cpp", "void check() {}\n", "no int main()"),
        ("rust", "fn check() {}\n", "no fn main()"),
        ("java", "class Other { public static void main(String[] a) {} }\n", "no class Main"),
        ("go", "func TestMain(m *testing.M) {}\n", "own TestMain"),
    ],
)
def test_a_test_program_without_an_end_to_mark_is_refused(
    language: FinishedLanguage, test: str, complaint: str
) -> None:
    program = "package main\n" if language == "go" else ""
    with pytest.raises(DatasetError, match=complaint):
        with_finish_line(language, program, test)


def test_the_finish_line_is_a_secret_the_program_text_does_not_hold() -> None:
    first, run = with_finish_line("java", "public class Solution {}\n", "public class Main { }\n")
    second, other = with_finish_line("java", "public class Solution {}\n", "public class Main { }\n")
    assert isinstance(run, RunTest) and run.stdin != other.stdin and first == second
    nonce = run.stdin.strip()
    assert run.expected_stdout == f"ok {nonce}\n" and nonce not in first
    # One public class per file: the finish line's.
    assert first.count("public class ") == 1 and "public class AirlockFinishLine" in first


def test_a_survey_counts_the_languages_of_checkers_and_interactors(tmp_path: Path) -> None:
    data = tmp_path / "contest.jsonl"
    records = [
        {"code": "", "tests": [], "checker": {"language": "cpp", "code": "x"}},
        {"code": "", "tests": [], "interactor": {"language": "rust", "code": "x"}, "language": "go"},
        {"code": "", "tests": [], "interactor": {"code": "x"}},
    ]
    data.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert survey(data, "python") == (3, {"python", "cpp", "rust", "go"})
