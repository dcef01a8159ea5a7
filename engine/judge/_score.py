"""``airlock score``: judge a JSONL data set into a JSONL result file, one line per input, in order."""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

from .._limits import Limits
from .._models import Language, safe_text
from .._submission import Submission, SubmissionResult, Verdict
from ._batches import Judge
from ._compare import Comparator
from ._datasets import DatasetError, read_submissions

__all__ = [
    "Details",
    "ScoreOptions",
    "ScoreReport",
    "ScoreSummary",
    "completed_lines",
    "score",
    "score_file",
    "summarise_output",
]

Details = Literal["all", "failures", "summary"]
Progress = Callable[[int], None]


class ScoreSummary:
    """Counts for the table printed at the end."""

    def __init__(self) -> None:
        self.verdicts: collections.Counter[str] = collections.Counter()
        self.judged = 0
        self.not_judged = 0
        self.invalid = 0
        self.skipped = 0
        self.tests_passed = 0
        self.tests_total = 0
        self.elapsed_s = 0.0

    def add(self, result: SubmissionResult) -> None:
        self.judged += 1
        self.not_judged += result.retryable
        self.verdicts[result.verdict.value] += 1
        self.tests_passed += result.passed
        self.tests_total += result.total


@dataclasses.dataclass(frozen=True)
class OutputSummary:
    """What the whole output file says (resumed lines included)."""

    tasks: int
    pass_at_k: dict[int, float]
    mean_points: float | None
    max_points: float | None


def summarise_output(output: Path, ks: Iterable[int]) -> OutputSummary:
    """The number of tasks in a result file (its lines grouped by ``id``: the samples of one
    task); for each ``k`` that every task has enough samples for, the mean unbiased pass@k
    estimate of the HumanEval paper; and, when results have points (subtasks), their mean and
    the mean of what was possible. A line that could not be read is a failed sample; a sample
    the infrastructure could not judge (``retryable``) is no sample at all: it says nothing
    about the program."""
    samples: dict[str, list[int]] = {}
    points: list[tuple[float, float]] = []
    with output.open(encoding="utf-8") as results:
        for line in results:
            record = json.loads(line)
            if record.get("retryable"):
                continue
            counts = samples.setdefault(str(record.get("id")), [0, 0])
            counts[0] += 1
            counts[1] += record.get("verdict") == Verdict.PASSED.value
            if record.get("max_points") is not None:
                points.append((record["points"], record["max_points"]))
    estimates = {}
    for k in sorted(set(ks)):
        if samples and all(n >= k for n, _ in samples.values()):
            estimates[k] = sum(_pass_at(n, c, k) for n, c in samples.values()) / len(samples)
    return OutputSummary(
        tasks=len(samples),
        pass_at_k=estimates,
        mean_points=statistics.fmean(earned for earned, _ in points) if points else None,
        max_points=statistics.fmean(possible for _, possible in points) if points else None,
    )


def _pass_at(n: int, c: int, k: int) -> float:
    """1 - C(n - c, k) / C(n, k), as a product that neither overflows nor loses precision."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def completed_lines(output: Path) -> set[int]:
    """Input line numbers already in ``output``; an unfinished last line (a killed run) is cut off
    first. Line numbers, not ids: ids repeat (several samples of one task) and need not exist."""
    if not output.exists():
        return set()
    data = output.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    if len(complete) != len(data):
        with output.open("r+b") as handle:
            handle.truncate(len(complete))
    lines = set()
    for record in complete.split(b"\n"):
        try:
            line = json.loads(record)["line"]
        except (ValueError, KeyError, TypeError, RecursionError):
            continue
        if type(line) is int:
            lines.add(line)
    return lines


def _record(result: SubmissionResult, line: int, details: Details) -> dict[str, Any]:
    record = result.model_dump(mode="json")
    if details == "summary":
        record.pop("tests")
    elif details == "failures":
        for test in record["tests"]:
            if test["verdict"] == Verdict.PASSED.value:
                for key in ("stdout", "stderr", "returned"):
                    test.pop(key, None)
    return {"line": line, **record}


async def score_file(
    engine: Judge,
    source: Path,
    output: Path,
    *,
    resume: bool,
    details: Details,
    read: Callable[[Path], Iterator[tuple[int, str, Submission | DatasetError]]],
    progress: Progress = lambda advance: None,
    deadline_s: float | None = None,
) -> ScoreSummary:
    """Judge every record of ``source`` and append one line per record to ``output``, in order;
    with ``deadline_s``, all of them by then (see ``Engine.judging``)."""
    started = time.monotonic()
    summary = ScoreSummary()
    done = completed_lines(output) if resume else set()
    pending: dict[int, dict[str, Any]] = {}
    lines_of_jobs: list[int] = []
    order: collections.deque[int] = collections.deque()

    def jobs() -> Iterator[Submission]:
        for line, identity, item in read(source):
            if line in done:
                summary.skipped += 1
                progress(1)
                continue
            order.append(line)
            if isinstance(item, DatasetError):
                summary.invalid += 1
                pending[line] = {"line": line, "id": safe_text(identity), "error": safe_text(str(item))}
                progress(1)
                continue
            lines_of_jobs.append(line)
            yield item

    with output.open("w" if not resume else "a", encoding="utf-8") as sink:

        def flush() -> None:
            while order and order[0] in pending:
                sink.write(json.dumps(pending.pop(order.popleft()), ensure_ascii=False) + "\n")
            sink.flush()

        try:
            async with engine.judging(jobs(), deadline_s=deadline_s) as results:
                async for index, result in results:
                    summary.add(result)
                    pending[lines_of_jobs[index]] = _record(result, lines_of_jobs[index], details)
                    progress(1)
                    flush()
        finally:
            # Whatever ends the run, every result judged before it that can be written in order
            # is kept (--resume takes the rest).
            flush()
            os.fsync(sink.fileno())
    summary.elapsed_s = time.monotonic() - started
    return summary


class ScoreOptions(BaseModel):
    """How a data set is read and judged: ``airlock score``'s flags."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    comparator: Comparator = "standard"
    limits: Limits | None = Field(None, description="for every record (a record's own limits otherwise)")
    stop_on_first_failure: bool = False
    language: Language = Field("python", description="of records that name none")
    resume: bool = Field(False, description="skip the input lines already in the output, append the rest")
    details: Details = "failures"
    deadline_s: float | None = Field(None, gt=0, description="every line has its result by then")
    pass_at: tuple[int, ...] = Field((1, 10, 100), min_length=1)


class ScoreReport(BaseModel):
    """What a run did: the table ``airlock score`` ends with, and its ``--summary-json``."""

    model_config = ConfigDict(frozen=True)

    judged: int
    invalid: int
    not_judged: int
    resumed: int
    verdicts: dict[str, int]
    tests_passed: int
    tests_total: int
    elapsed_s: float
    tasks: int = Field(description="the output's lines grouped by id")
    pass_at_k: dict[str, float] = Field(description="for each k every task has enough samples for")
    mean_points: float | None = Field(None, description="results with subtasks: the mean of their points")
    max_points: float | None = Field(None, description="results with subtasks: the mean of their possible points")
    results: int = Field(exclude=True, description="lines in the output (pass@k means something when above tasks)")


async def score(
    judge: Judge, source: Path, output: Path, options: ScoreOptions, *, progress: Progress = lambda advance: None
) -> ScoreReport:
    """Judge the data set ``source`` into ``output`` (one line per record, in order) and report
    on it, pass@k included."""

    def read(path: Path) -> Iterator[tuple[int, str, Submission | DatasetError]]:
        return read_submissions(
            path,
            comparator=options.comparator,
            limits=options.limits,
            stop_on_first_failure=options.stop_on_first_failure,
            language=options.language,
        )

    summary = await score_file(
        judge,
        source,
        output,
        resume=options.resume,
        details=options.details,
        read=read,
        progress=progress,
        deadline_s=options.deadline_s,
    )
    whole = await anyio.to_thread.run_sync(summarise_output, output, options.pass_at)
    with output.open("rb") as written:
        results = sum(1 for _ in written)
    return ScoreReport(
        judged=summary.judged,
        invalid=summary.invalid,
        not_judged=summary.not_judged,
        resumed=summary.skipped,
        verdicts=dict(summary.verdicts),
        tests_passed=summary.tests_passed,
        tests_total=summary.tests_total,
        elapsed_s=round(summary.elapsed_s, 3),
        tasks=whole.tasks,
        pass_at_k={str(k): v for k, v in whole.pass_at_k.items()},
        mean_points=whole.mean_points,
        max_points=whole.max_points,
        results=results,
    )
