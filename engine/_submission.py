"""Public models for judging: a submission with its tests, and what the judge concluded."""

from __future__ import annotations

import enum
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    Tag,
    computed_field,
    field_validator,
    model_validator,
)

from ._languages import toolchain
from ._limits import Limits
from ._models import ErrorInfo, Language, SafeText, Usage
from .harness.codec import MAX_DEPTH
from .judge._compare import Comparator

_JS_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*")

__all__ = [
    "AssertTest",
    "CallTest",
    "Case",
    "CaseResult",
    "Checker",
    "Interactor",
    "RunTest",
    "StdinTest",
    "Submission",
    "SubmissionResult",
    "Subtask",
    "SubtaskResult",
    "Verdict",
]

# A submission's code and each test's data are bounded; larger jobs are refused up front.
MAX_CODE_CHARS = 1_000_000
MAX_TEST_DATA_CHARS = 64_000_000
MAX_TESTS = 10_000


class Verdict(enum.StrEnum):
    """The judge's conclusion about one test (or, for a submission, its first failure)."""

    PASSED = "passed"
    WRONG_ANSWER = "wrong_answer"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    COMPILE_ERROR = "compile_error"
    SANDBOX_ERROR = "sandbox_error"
    """The sandbox failed around the program; nothing is known about this test."""
    SKIPPED = "skipped"
    """Not run: an earlier test failed and the submission asked to stop early."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StdinTest(_Model):
    """The program reads ``input`` on standard input; its standard output is judged."""

    kind: Literal["stdin"] = "stdin"
    input: str = Field("", max_length=MAX_TEST_DATA_CHARS)
    expected_output: str = Field(
        "",
        max_length=MAX_TEST_DATA_CHARS,
        description="required unless an interactor judges the test (it then gets it as its answer file)",
    )


class CallTest(_Model):
    """``fn_name`` (a function, or a method of ``class Solution``) is called with ``args``."""

    kind: Literal["call"] = "call"
    args: list[JsonValue] = Field(default_factory=list)
    expected: JsonValue

    @field_validator("args", "expected")
    @classmethod
    def _judgeable_depth(cls, value: JsonValue) -> JsonValue:
        if _depth(value) > MAX_DEPTH:
            raise ValueError(f"values nested more than {MAX_DEPTH} levels deep cannot be judged")
        return value


def _depth(value: JsonValue) -> int:
    """How deeply ``value`` nests lists and objects, without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, list):
            stack.extend((child, level + 1) for child in item)
        elif isinstance(item, dict):
            stack.extend((child, level + 1) for child in item.values())
    return deepest


class AssertTest(_Model):
    """Trusted test code (plain ``assert``s, or ``check(candidate)``) is run against the program.

    The test code runs outside the program's process, and the program answers with plain
    values. ``candidate`` (and ``entry_point`` by name) is the program's function; any other
    name resolves to the test code's own definitions first, then to ``prelude``'s, then to the
    builtins, and only then to a function of the program: a program cannot redefine what the
    test code relies on.
    """

    kind: Literal["assert"] = "assert"
    code: str = Field(min_length=1, max_length=MAX_TEST_DATA_CHARS)
    prelude: str = Field(
        "",
        max_length=MAX_TEST_DATA_CHARS,
        description="trusted code run before `code`, in its namespace: helpers the test code relies on "
        "(a HumanEval prompt), which the program then cannot redefine",
    )


class RunTest(_Model):
    """The program runs with ``stdin``; it passes when it exits with ``expected_exit_code``
    and, if ``expected_stdout`` or ``expected_stderr`` is given, prints it there (an empty
    ``expected_stderr`` is how a harness that judges ``console.assert`` by its message judges)."""

    kind: Literal["run"] = "run"
    stdin: str = Field("", max_length=MAX_TEST_DATA_CHARS)
    expected_stdout: str | None = Field(None, max_length=MAX_TEST_DATA_CHARS)
    expected_stderr: str | None = Field(None, max_length=MAX_TEST_DATA_CHARS)
    expected_exit_code: int = 0


class Checker(_Model):
    """Trusted code from the data set's author that judges each output in place of a comparison,
    for problems with more than one right answer. It speaks one of two protocols:

    - ``function`` (Python only, its default): ``code`` defines ``check(input, expected,
      output)``, called once per test whose program ran to its end, with the three texts; it
      returns True or False, a score from 0 to 1 (1 passes), or either of those with a message
      as a pair.
    - ``testlib`` (every other language's default): ``code`` is a program, compiled once, run
      once per test as ``checker input output answer`` (three files in its working directory);
      its exit code is the verdict, as testlib's: 0 accepted, 1 wrong answer, 2 presentation
      error (a wrong answer whose detail says so), 3 the judge's failure, 7 a score from 0 to 1
      that it prints after ``points``; what it writes on stderr is the test's detail. C++
      checkers may ``#include "testlib.h"`` (the cpp image has one: docs/contest-judging.md).

    Either runs in a container of its own, after the program's is gone: the program never sees
    the expected answer, and nothing it leaves (files, processes) reaches the checker, which
    gets its output as text and nothing else.
    """

    language: Language = "python"
    code: str = Field(min_length=1, max_length=MAX_CODE_CHARS)
    protocol: Literal["function", "testlib"] = Field(
        "function",
        description="function (a Python check function; Python's default) or testlib (a program judged by its "
        "exit code; every other language's default)",
    )
    entry: str = Field("check", description="the function to call (function protocol)")
    standard: str | None = Field(None, description="the C or C++ standard to compile it with (-std=)")

    @model_validator(mode="before")
    @classmethod
    def _protocol_of_the_language(cls, data: Any) -> Any:
        if isinstance(data, dict) and "protocol" not in data and data.get("language", "python") != "python":
            data = {**data, "protocol": "testlib"}
        return data

    @field_validator("entry")
    @classmethod
    def _identifier(cls, name: str) -> str:
        if not name.isidentifier():
            raise ValueError(f"{name!r} is not a Python identifier")
        return name

    @model_validator(mode="after")
    def _protocol_fits_the_language(self) -> Checker:
        if self.protocol == "function" and self.language != "python":
            raise ValueError(f"a {self.language} checker is a program: its protocol is 'testlib', not 'function'")
        toolchain(self.language).commands_for(self.code, self.standard)
        return self


class Interactor(_Model):
    """Trusted code from the data set's author that judges an interactive problem by talking to
    the program: a program of its own, compiled once, run once per test as ``interactor input
    output`` (``input`` holds the test's input, which the program never gets; ``output`` is a
    file it may write; a third argument, ``answer``, when the test has an expected output), its
    stdin connected to the program's stdout and its stdout to the program's stdin. Its exit code
    is the verdict, as a testlib checker's (see :class:`Checker`); C++ interactors may
    ``#include "testlib.h"`` and ``registerInteraction``.

    It runs in a container of its own, beside the program's, and the host relays the bytes
    between them: neither can reach the other but through the protocol.
    """

    language: Language = "python"
    code: str = Field(min_length=1, max_length=MAX_CODE_CHARS)
    standard: str | None = Field(None, description="the C or C++ standard to compile it with (-std=)")

    @model_validator(mode="after")
    def _compiles_in_its_language(self) -> Interactor:
        toolchain(self.language).commands_for(self.code, self.standard)
        return self


class Subtask(_Model):
    """A group of tests worth ``points`` (IOI's scoring): all of them or none, so the subtask
    earns ``points`` times the least score among its tests (1 for a passed test, a checker's
    partial score, 0 for any other failure)."""

    tests: list[Annotated[int, Field(ge=0)]] = Field(min_length=1, max_length=MAX_TESTS, description="test indices")
    points: float = Field(ge=0, allow_inf_nan=False)


# One test of a submission (named so that pytest never takes it for a test class).
def _kind(test: Any) -> Any:
    return test.get("kind") if isinstance(test, dict) else getattr(test, "kind", None)


# A callable discriminator, for an error that says what `kind` may be (pydantic's own names its
# machinery: "Unable to extract tag using discriminator").
Case = Annotated[
    Annotated[StdinTest, Tag("stdin")]
    | Annotated[CallTest, Tag("call")]
    | Annotated[AssertTest, Tag("assert")]
    | Annotated[RunTest, Tag("run")],
    Discriminator(
        _kind, custom_error_type="test_kind", custom_error_message="kind: must be 'stdin', 'call', 'assert' or 'run'"
    ),
]


class Submission(_Model):
    """One program and the tests that judge it. All tests must be of one kind."""

    id: str | None = Field(None, max_length=1000)
    language: Language = "python"
    standard: str | None = Field(None, description="C and C++: the language standard (c17, c++20, gnu++17, ...)")
    code: str = Field(max_length=MAX_CODE_CHARS)
    tests: list[Case] = Field(min_length=1, max_length=MAX_TESTS)
    fn_name: str | None = Field(None, description="call tests: the function or Solution method to call")
    entry_point: str | None = Field(None, description="assert tests: the function bound to `candidate`")
    comparator: Comparator = "standard"
    checker: Checker | None = Field(None, description="judges stdin and run tests' outputs instead of `comparator`")
    interactor: Interactor | None = Field(
        None, description="judges stdin tests by talking to the program (an interactive problem)"
    )
    stop_on_first_failure: bool = False
    process_per_test: bool | None = Field(
        None,
        description=(
            "Python programs: true, each test in a process of its own, forked from the loaded program (no test's "
            "memory reaches the next); false, the tests one after another in one process, as the unsafe references "
            "run them (about a third of the CPU per test; what a test leaves in that process, the next one finds); "
            "unset: the engine's setting (false unless set). Other languages run a process per test either way."
        ),
    )
    limits: Limits | None = None
    subtasks: list[Subtask] | None = Field(
        None, max_length=MAX_TESTS, description="groups of tests with points; the result then has `points`"
    )

    @field_validator("fn_name", "entry_point")
    @classmethod
    def _identifier(cls, name: str | None) -> str | None:
        # A Python name, or a JavaScript one ($ is a letter there).
        if name is not None and not (name.isidentifier() or _JS_IDENTIFIER.fullmatch(name)):
            raise ValueError(f"{name!r} is not an identifier")
        return name

    @model_validator(mode="after")
    def _one_kind(self) -> Submission:
        kinds = {test.kind for test in self.tests}
        if len(kinds) > 1:
            raise ValueError(f"all tests of a submission must be of one kind, got {sorted(kinds)}")
        if self.kind == "call" and self.fn_name is None:
            raise ValueError("call tests need fn_name")
        if self.checker is not None and self.kind not in ("stdin", "run"):
            raise ValueError(f"a checker judges outputs: stdin and run tests, not {self.kind} tests")
        if self.interactor is not None:
            if self.kind != "stdin":
                raise ValueError(f"an interactor talks to a program through stdin tests, not {self.kind} tests")
            if self.checker is not None:
                raise ValueError("an interactive problem is judged by its interactor; give no checker")
        else:
            for index, test in enumerate(self.tests):
                if isinstance(test, StdinTest) and "expected_output" not in test.model_fields_set:
                    raise ValueError(f"test {index} needs expected_output (only an interactor's tests may omit it)")
        if self.standard is not None:
            toolchain(self.language).commands_for(self.code, self.standard)  # a ValueError names the choices
        offered = toolchain(self.language).kinds
        if self.kind not in offered:
            raise ValueError(f"{self.language} programs take {', '.join(sorted(offered))} tests, not {self.kind} tests")
        for number, subtask in enumerate(self.subtasks or []):
            beyond = [index for index in subtask.tests if index >= len(self.tests)]
            if beyond:
                raise ValueError(f"subtask {number} names test {beyond[0]}; there are {len(self.tests)} tests (from 0)")
        return self

    @property
    def kind(self) -> str:
        return self.tests[0].kind


class CaseResult(_Model):
    """The verdict on one test, with what was observed.

    ``stdout``, ``stderr`` and ``returned`` are what the judge saw, kept up to a bounded size
    (``clipped`` says when they were shortened; the judge compared them whole). ``returned`` is
    the JSON form of the returned value (tuples and sets as lists, bytes and other values
    without one as their ``repr``).
    """

    index: int
    verdict: Verdict
    detail: SafeText | None = None
    stdout: SafeText = ""
    stderr: SafeText = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    clipped: bool = False
    returned: JsonValue = None
    score: float | None = Field(None, description="the checker's score, 0 to 1, when it gave one")
    exit_code: int | None = None
    signal: int | None = None
    usage: Usage = Usage()
    error: ErrorInfo | None = None


class SubtaskResult(_Model):
    """What one subtask earned, and the verdict of its first test that did not pass."""

    points: float
    max_points: float
    verdict: Verdict


class SubmissionResult(_Model):
    """Per-test verdicts and the summary a reward function needs."""

    id: SafeText | None = None
    verdict: Verdict
    passed: int
    total: int
    tests: list[CaseResult]
    error: ErrorInfo | None = None
    wall_time_s: float = 0.0
    points: float | None = Field(None, description="with subtasks: the sum of what each earned")
    max_points: float | None = Field(None, description="with subtasks: the sum of their points")
    subtasks: list[SubtaskResult] | None = None
    retryable: bool = Field(
        False,
        description="the sandbox failed around the program (the container engine, a lost container, the batch's "
        "deadline) before every test was judged: those tests are sandbox_error, not the program's verdicts, and "
        "judging it again may succeed",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def first_failure(self) -> CaseResult | None:
        return next((test for test in self.tests if test.verdict is not Verdict.PASSED), None)

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.PASSED
