"""Property tests: whatever arrives at a boundary gets a clear error naming the problem, never a
traceback from deep inside, and never a crash of the parser itself."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from engine import Limits, Submission
from engine.harness import codec
from engine.harness.harness import RequestError, parse_request
from engine.harness.protocol import PROTOCOL_VERSION
from engine.judge._protocol import HarnessFeed, ReportReader

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=25,
)
submission_keys = st.sampled_from(
    [
        "id",
        "language",
        "code",
        "tests",
        "fn_name",
        "entry_point",
        "comparator",
        "stop_on_first_failure",
        "limits",
        "kind",
        "input",
        "expected_output",
        "args",
        "expected",
        "stdin",
        "wall_time_s",
        "memory_mb",
    ]
)
test_dicts = st.fixed_dictionaries(
    {"kind": st.sampled_from(["stdin", "call", "assert", "run", "other"])},
    optional={
        "input": json_values,
        "expected_output": json_values,
        "args": json_values,
        "expected": json_values,
        "code": json_values,
        "stdin": json_values,
    },
)
submissions = st.fixed_dictionaries(
    {},
    optional={
        "code": json_values,
        "tests": st.lists(test_dicts, max_size=3) | json_values,
        "fn_name": json_values,
        "entry_point": json_values,
        "language": json_values,
        "comparator": json_values,
        "limits": st.dictionaries(st.sampled_from(list(Limits.model_fields)), json_values, max_size=3) | json_values,
    },
) | st.dictionaries(submission_keys, json_values, max_size=6)


@settings(max_examples=500, deadline=None)
@given(submissions)
def test_submissions_validate_or_say_which_field_is_wrong(data: dict[str, Any]) -> None:
    try:
        Submission.model_validate(data)
    except ValidationError as exc:
        assert exc.errors() and all(error["msg"] for error in exc.errors())


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([*Limits.model_fields, "bogus"]), json_values, max_size=4))
def test_limits_validate_or_say_which_field_is_wrong(data: dict[str, Any]) -> None:
    try:
        Limits.model_validate(data)
    except ValidationError as exc:
        assert all(error["loc"] or "tmpfs_mb" in error["msg"] for error in exc.errors())


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"code": "x" * 1_000_001, "tests": [{"kind": "stdin", "expected_output": ""}]}, "code"),
        ({"code": "x", "tests": [{"kind": "stdin", "expected_output": ""}] * 10_001}, "tests"),
        ({"code": "x", "tests": [{"kind": "stdin", "input": "x" * 64_000_001, "expected_output": ""}]}, "input"),
        (
            {"code": "x", "tests": [{"kind": "stdin", "expected_output": ""}], "limits": {"memory_mb": 10**9}},
            "memory_mb",
        ),
        (
            {"code": "x", "tests": [{"kind": "stdin", "expected_output": ""}], "limits": {"wall_time_s": -1}},
            "wall_time_s",
        ),
        ({"code": "x", "tests": [{"kind": "stdin", "expected_output": ""}], "limits": {"pids": 10**6}}, "pids"),
    ],
)
def test_huge_or_absurd_jobs_are_refused_with_a_reason(data: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        Submission.model_validate(data)
    assert any(field in ".".join(map(str, error["loc"])) for error in info.value.errors())


@pytest.mark.parametrize("test", [{"input": "1", "expected_output": "1"}, {"kind": "stdn"}, 7])
def test_a_test_without_a_known_kind_is_told_the_kinds(test: Any) -> None:
    with pytest.raises(ValidationError) as info:
        Submission.model_validate({"code": "x", "tests": [test]})
    assert "kind: must be 'stdin', 'call', 'assert' or 'run'" in str(info.value)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_the_harness_refuses_any_bad_request_with_a_message(raw: bytes) -> None:
    try:
        parse_request(raw)
    except RequestError as exc:
        assert str(exc)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "protocol",
                "mode",
                "code",
                "tests",
                "entry",
                "time_limit_s",
                "output_limit_bytes",
                "interactive",
                "program_files",
                "shared_process",
                "runner",
            ]
        ),
        json_values,
        max_size=11,
    )
)
def test_the_harness_request_parser_never_crashes(request: dict[str, Any]) -> None:
    request.setdefault("protocol", PROTOCOL_VERSION)
    try:
        parse_request(json.dumps(request).encode())
    except RequestError as exc:
        assert str(exc)


SCRIPT_REQUEST = {
    "protocol": PROTOCOL_VERSION,
    "mode": "script",
    "code": "print(1)",
    "tests": [{"stdin": ""}],
    **{field: 1 for field in ("time_limit_s", "wall_limit_s", "compile_time_limit_s", "compile_wall_limit_s")},
    "output_limit_bytes": 100,
}


@pytest.mark.parametrize(
    "change",
    [
        {"shared_process": "yes"},
        {"shared_process": True, "interactive": True},
        {"shared_process": True, "mode": "prime"},
        {"shared_process": True, "runner": "process", "process": {"source": "a.c", "run": ["./a"]}},
    ],
)
def test_the_harness_refuses_tests_sharing_a_process_where_none_can(change: dict[str, Any]) -> None:
    assert parse_request(json.dumps({**SCRIPT_REQUEST, "shared_process": True}).encode())["shared_process"]
    with pytest.raises(RequestError, match="shared_process"):
        parse_request(json.dumps({**SCRIPT_REQUEST, **change}).encode())


@settings(max_examples=500, deadline=None)
@given(json_values)
def test_decoding_any_json_yields_a_value_or_a_codec_error(data: Any) -> None:
    try:
        codec.decode(data, keep_types=True)
    except codec.CodecError as exc:
        assert str(exc)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(max_size=80) | json_values.map(lambda v: json.dumps(v).encode()), max_size=6),
    st.booleans(),
)
def test_the_report_reader_never_crashes_and_fails_closed(lines: list[bytes], interactive: bool) -> None:
    peer = HarnessFeed() if interactive else None
    try:
        reader = ReportReader(2, peer)
        for line in lines:
            assert isinstance(reader(line), bool)
        assert not reader.finished or (reader.error is None and len(reader.observations) <= 2)
    finally:
        if peer is not None:
            peer.release()
