"""Whatever a data set or a request holds, every item gets exactly one result and nothing raises
out of ``airlock score`` or ``/v1/judge``: properties over arbitrary bytes, arbitrary JSON, and
records of every layout with arbitrary values in their fields (integers of thousands of digits,
deep nesting, lone surrogates, wrong types).

``airlock score``'s reading, planning and writing run in-process against a judge that runs
nothing (so that thousands of records cost seconds); ``/v1/judge`` runs on a real server, whose
judging is real.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from integration.serving import Server

from engine import CaseResult, Submission, SubmissionResult, Verdict
from engine.judge._datasets import read_submissions, survey
from engine.judge._score import score_file

# Stands for an integer of 5000 digits, which no JSON writer of Python's writes: spliced in as text.
BIG = "\x00BIG\x00"
BIG_DIGITS = "9" * 5000


def dumps(value: Any) -> str:
    """``value`` as JSON, each BIG an integer of 5000 digits."""
    return json.dumps(value, ensure_ascii=False).replace(json.dumps(BIG), BIG_DIGITS)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([BIG, 2**63, -(2**64)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["\ud800", "print(1)", "def f(x):\n    return x", "1\n2\n", "python", "cpp", "stdin", "call"]),
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
tests = st.lists(
    st.fixed_dictionaries(
        {"kind": st.sampled_from(["stdin", "call", "assert", "run", "x"])},
        optional={
            "input": json_values,
            "expected_output": json_values,
            "args": json_values,
            "expected": json_values,
            "code": json_values,
            "stdin": json_values,
        },
    ),
    max_size=3,
)
common = {
    "id": json_values,
    "language": st.sampled_from(["python", "cpp", "brainfuck"]) | json_values,
    "limits": json_values,
    "comparator": json_values,
    "fn_name": json_values,
}
native = st.fixed_dictionaries({"code": json_values, "tests": tests | json_values}, optional=common)
input_output = st.fixed_dictionaries(
    {"inputs": st.lists(json_values, max_size=3), "outputs": st.lists(json_values, max_size=3)},
    optional={"fn_name": json_values},
)
apps = st.fixed_dictionaries(
    {"input_output": input_output | input_output.map(dumps) | json_values},
    optional={"solutions": json_values, "completion": json_values, "code": json_values, **common},
)
humaneval = st.fixed_dictionaries(
    {"prompt": json_values, "test": json_values, "entry_point": json_values},
    optional={"completion": json_values, "canonical_solution": json_values, "task_id": json_values},
)
records = st.one_of(native, apps, humaneval, json_values)


def _line(record: Any) -> bytes:
    return dumps(record).encode("utf-8", errors="surrogatepass")


lines = st.lists(
    st.one_of(
        records.map(_line),
        st.binary(max_size=60).map(lambda raw: raw.replace(b"\n", b" ")),
        st.sampled_from([b"[" * 5000, b'{"code": "x", "tests": [' + b"7" * 1_000_001 + b"]}", b"\xff\xfe"]),
    ),
    min_size=1,
    max_size=12,
)


class NothingRunsJudge:
    """Passes every submission without running it: the property is about reading and writing."""

    async def judge(self, submission: Submission) -> SubmissionResult:
        tests = [CaseResult(index=index, verdict=Verdict.PASSED) for index in range(len(submission.tests))]
        return SubmissionResult(
            id=submission.id, verdict=Verdict.PASSED, passed=len(tests), total=len(tests), tests=tests
        )

    async def judge_many(
        self, submissions: Iterable[Submission], *, deadline_s: float | None = None
    ) -> list[SubmissionResult]:
        return [await self.judge(submission) for submission in submissions]

    @contextlib.asynccontextmanager
    async def judging(
        self, submissions: Iterable[Submission], *, deadline_s: float | None = None
    ) -> AsyncIterator[MemoryObjectReceiveStream[tuple[int, SubmissionResult]]]:
        send, receive = anyio.create_memory_object_stream[tuple[int, SubmissionResult]](1)
        async with anyio.create_task_group() as group:

            async def feed() -> None:
                async with send:
                    for index, submission in enumerate(submissions):
                        await send.send((index, await self.judge(submission)))

            group.start_soon(feed)
            async with receive:
                yield receive


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=lines)
# Invalid lines, then one that is judged.
@example(data=[b'{"code": null, "tests": []}', b'{"input_output": {"inputs": [[]], "outputs": [[]]}, "solutions": ""}'])
def test_airlock_score_answers_every_line_once(tmp_path_factory: pytest.TempPathFactory, data: list[bytes]) -> None:
    folder = tmp_path_factory.mktemp("any")
    source, output = folder / "in.jsonl", folder / "out.jsonl"
    source.write_bytes(b"\n".join(data) + b"\n")
    expected = [number for number, line in enumerate(data, start=1) if line.strip()]
    count, _ = survey(source, "python")
    assert count == len(expected)

    async def score() -> None:
        await score_file(
            NothingRunsJudge(), source, output, resume=False, details="all", read=lambda path: read_submissions(path)
        )

    anyio.run(score)
    written = [json.loads(line) for line in output.read_bytes().splitlines()]
    assert [record["line"] for record in written] == expected
    # A line is refused (its error, a text) or judged (a verdict, and the submission's error or null).
    assert all(isinstance(record.get("error"), str) != ("verdict" in record) for record in written)


@pytest.fixture(scope="module")
def server(language_images: None) -> Iterator[Server]:
    running = Server("runc", "--wall-time-s", "2", api_key=None)
    yield running
    assert "Traceback" not in running.stop()


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(items=st.lists(records, min_size=1, max_size=8))
def test_the_batch_api_answers_every_item_once(server: Server, items: list[Any]) -> None:
    body = dumps({"submissions": items}).encode("utf-8", errors="surrogatepass")
    answer = httpx.post(
        f"{server.url}/v1/judge", content=body, headers={"content-type": "application/json"}, timeout=600
    )
    if answer.status_code == 422:
        # The request as a whole is refused only for its own shape (never for one item), by name.
        assert "submissions" in answer.json()["message"] or "body" in answer.json()["message"], answer.text
        return
    assert answer.status_code == 200, answer.text
    # NDJSON lines end at \n only (str.splitlines would also split at U+2028 inside a string).
    lines = [json.loads(line) for line in answer.text.split("\n") if line]
    assert [line["index"] for line in lines] == list(range(len(items)))
    assert all(("error" in line) != ("verdict" in line) for line in lines)


class BreaksAtThird(NothingRunsJudge):
    """Fails the whole run (as a lost container engine would) at the third submission."""

    def __init__(self) -> None:
        self.seen = 0

    async def judge(self, submission: Submission) -> SubmissionResult:
        self.seen += 1
        if self.seen == 3:
            raise RuntimeError("the judge broke")
        return await super().judge(submission)


def test_a_run_that_breaks_keeps_every_result_judged_before(tmp_path: Path) -> None:
    source, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    record = {"code": "print(1)", "tests": [{"kind": "stdin", "expected_output": "1"}]}
    source.write_text("not json\n" + "\n".join(json.dumps({**record, "id": str(n)}) for n in range(5)) + "\n")

    async def score() -> None:
        await score_file(
            BreaksAtThird(), source, output, resume=False, details="all", read=lambda path: read_submissions(path)
        )

    with pytest.raises(ExceptionGroup) as raised:
        anyio.run(score)
    assert raised.group_contains(RuntimeError, match="the judge broke")
    written = [json.loads(line) for line in output.read_bytes().splitlines()]
    assert [record["line"] for record in written] == [1, 2, 3]
