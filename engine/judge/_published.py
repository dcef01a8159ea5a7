"""Published data sets in the layouts their authors ship, each judged as its own harness judges.

Every reader takes one record (a dict) and returns a :class:`Submission`, or raises
``DatasetError`` (through ``_datasets``, which recognises the layout by its fields):

- MBPP (``test_list``): the setup code, then the program, as MBPP's harness runs them in one
  namespace; each assert of ``test_list`` is one assert test, with the setup code as its
  trusted prelude. ``challenge_test_list`` is not judged, as in the published evaluation.
- HumanEval-X (``task_id`` such as ``CPP/12``, ``prompt``, ``declaration``, ``test``): the
  program assembled as CodeGeeX's harness assembles it, per language. Python's test runs as
  trusted assert code (with the harness's imports, numpy among them, as its prelude); C++, Java
  and Go pass when their tests run to their end (``_finish_line``: the harness's exit status
  alone would pass an early ``exit(0)``), JavaScript when it also prints nothing else (the
  harness's reading of ``console.assert``). Rust is not judged here: its tests need ``cargo test``.
- MultiPL-E (``name``, ``language``, ``prompt``, ``tests`` as text): ``prompt + completion +
  tests``, passing when the tests run to their end (MultiPL-E's evaluators take exit 0); Java's
  class ``Problem`` with assertions on, as ``java -ea``; Python's tests as trusted assert code.
- LiveCodeBench (``public_test_cases``, ``private_test_cases``): stdin tests, or calls of
  ``metadata.func_name`` (a ``Solution`` method or a function) with one JSON argument per line.
  Private tests may be base64 + zlib + pickle of a JSON text: only plain values are unpickled.
- CodeContests (``public_tests``, ``private_tests``, ``generated_tests``): stdin tests with the
  problem's ``time_limit`` and ``memory_limit_bytes``; the code is the record's completion or its
  first solution in a language Airlock runs.
- BigCodeBench (``complete_prompt``, ``code_prompt``, ``test``): each method of the test's
  ``TestCases`` is one run test, run as BigCodeBench's harness runs it: in the program's own
  process (its mocks patch the program's modules), so its verdict is only as strong as that
  harness's. See ``_BIGCODEBENCH_DRIVER``.
"""

from __future__ import annotations

import ast
import base64
import io
import math
import pickle
import zlib
from typing import Any, Literal

from .._limits import Limits
from .._submission import AssertTest, CallTest, StdinTest, Submission
from ._finish_line import FinishedLanguage, finish_line_tests, with_finish_line
from ._record_values import DatasetError, extract_code, load_json

__all__ = [
    "bigcodebench",
    "code_contests",
    "humaneval_x",
    "is_humaneval_x",
    "is_program",
    "language_of",
    "livecodebench",
    "mbpp",
    "multipl_e",
]

# The imports CodeGeeX's harness puts before every program of a language (``IMPORT_HELPER``).
_HUMANEVAL_X_PYTHON_IMPORTS = (
    "import math\nimport re\nimport sys\nimport copy\nimport datetime\nimport itertools\nimport collections\n"
    "import heapq\nimport statistics\nimport functools\nimport hashlib\nimport numpy\nimport numpy as np\n"
    "import string\nfrom typing import *\nfrom collections import *\n"
)
_HUMANEVAL_X_CPP_INCLUDES = (
    "#include<stdlib.h>",
    "#include<algorithm>",
    "#include<math.h>",
    "#include<stdio.h>",
    "#include<vector>",
    "#include<string>",
    "#include<climits>",
    "#include<cstring>",
    "#include<iostream>",
)
_HUMANEVAL_X_GO_PACKAGES = (
    "math",
    "strings",
    "fmt",
    "strconv",
    "time",
    "bytes",
    "regexp",
    "sort",
    "math/rand",
    "crypto/md5",
)
_HUMANEVAL_X_LANGUAGES = {
    "python": "python",
    "cpp": "cpp",
    "java": "java",
    "javascript": "javascript",
    "js": "javascript",
    "go": "go",
}
_MULTIPL_E_LANGUAGES: dict[str, Literal["python"] | FinishedLanguage] = {
    "py": "python",
    "python": "python",
    "js": "javascript",
    "javascript": "javascript",
    "ts": "typescript",
    "cpp": "cpp",
    "java": "java",
    "go_test.go": "go",
    "go": "go",
    "rs": "rust",
    "rust": "rust",
}
# CodeContests' language codes (its ``Language`` enum) for the languages Airlock runs.
_CODE_CONTESTS_LANGUAGES = {2: "cpp", 3: "python", 4: "java"}
# A Go file of tests builds as a test binary, linking the testing package and testify: seconds
# of CPU where a program takes one. Records that set no compile limit get this one.
GO_TEST_COMPILE_S = 30.0
# A compressed test file larger than this is refused rather than inflated.
MAX_INFLATED_BYTES = 256 << 20


def _text_field(record: dict[str, Any], *names: str) -> str:
    for name in names:
        value = record.get(name)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and isinstance(value[0], str):
            return value[0]
    raise DatasetError(f"no {' or '.join(repr(n) for n in names)} text")


def _go_tests(defaults: dict[str, Any]) -> dict[str, Any]:
    limits = defaults.get("limits") or Limits()
    if "compile_time_s" in limits.model_fields_set:
        return defaults
    return {**defaults, "limits": limits.model_copy(update={"compile_time_s": GO_TEST_COMPILE_S})}


def _last_function(source: str) -> str | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None
    names = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return names[-1] if names else None


def is_program(source: str) -> bool:
    """Whether ``source`` parses as Python on its own (a prompt that can be a trusted prelude)."""
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return False
    return True


def _python_check(
    prelude: str, prompt: str, body: str, test: str, defaults: dict[str, Any], identity: str
) -> Submission:
    """A HumanEval-style Python problem: the test runs as trusted assert code, with the prompt
    (when it is a program on its own) as its prelude and the prompt's last function as the one
    it checks."""
    entry = _last_function(prompt)
    trusted = prelude + prompt if is_program(prelude + prompt) else prelude
    test_case = AssertTest(code=test, prelude=trusted)
    return Submission(id=identity, code=prelude + prompt + body, tests=[test_case], entry_point=entry, **defaults)


def language_of(record: dict[str, Any]) -> str | None:
    """The language a published layout names in its own way (a HumanEval-X task id, MultiPL-E's
    codes, CodeContests' solution codes), or None."""
    if is_humaneval_x(record):
        return _HUMANEVAL_X_LANGUAGES.get(str(record["task_id"]).split("/", 1)[0].lower())
    if isinstance(record.get("tests"), str) and "prompt" in record:
        return _MULTIPL_E_LANGUAGES.get(str(record.get("language", "")))
    solutions = record.get("solutions")
    if isinstance(solutions, dict) and "completion" not in record and "public_tests" in record:
        codes = solutions.get("language") or []
        return next((_CODE_CONTESTS_LANGUAGES[c] for c in codes if c in _CODE_CONTESTS_LANGUAGES), None)
    return None


def mbpp(record: dict[str, Any], identity: str, defaults: dict[str, Any]) -> Submission:
    tests = record["test_list"]
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise DatasetError("MBPP's test_list must be a non-empty list of assert statements")
    setup = record.get("test_setup_code") or ""
    if not isinstance(setup, str):
        raise DatasetError("MBPP's test_setup_code must be text")
    code = _text_field(record, "completion", "generation", "code")
    # MBPP's harness runs the setup code, the program and the tests in one namespace: the
    # program sees the setup's classes, and the tests the setup's objects.
    program = f"{setup}\n{code}" if setup else code
    return Submission(
        id=identity, code=program, tests=[AssertTest(code=test, prelude=setup) for test in tests], **defaults
    )


def is_humaneval_x(record: dict[str, Any]) -> bool:
    task = record.get("task_id")
    return isinstance(task, str) and "/" in task and "declaration" in record and "test" in record


def _python_completion(code: str) -> str:
    """The completion as CodeGeeX's harness keeps it: up to its first line that is not indented."""
    kept = []
    for line in code.split("\n"):
        if line.strip() and line[0] not in " \t":
            break
        kept.append(line)
    return "\n".join(kept)


def humaneval_x(record: dict[str, Any], identity: str, defaults: dict[str, Any]) -> Submission:
    prefix = str(record["task_id"]).split("/", 1)[0].lower()
    language = _HUMANEVAL_X_LANGUAGES.get(prefix)
    if language is None:
        raise DatasetError(
            f"HumanEval-X {prefix!r} problems are not judged here (languages: python, cpp, java, js, go)"
        )
    prompt, test = _text_field(record, "prompt"), _text_field(record, "test")
    code = _text_field(record, "completion", "generation", "canonical_solution")
    defaults = {**defaults, "language": language}
    if language == "python":
        return _python_check(_HUMANEVAL_X_PYTHON_IMPORTS, prompt, _python_completion(code), test, defaults, identity)
    if language == "cpp":
        includes = "".join(f"{line}\n" for line in _HUMANEVAL_X_CPP_INCLUDES if line not in prompt)
        program, run = with_finish_line("cpp", f"{includes}\n{prompt}{code}", test)
    elif language == "go":
        imports = str(record.get("import") or "")
        setup = _text_field(record, "test_setup")
        others = [
            f'"{package}"'
            for package in _HUMANEVAL_X_GO_PACKAGES
            if package not in setup and f"{package.split('/')[-1]}." in code
        ]
        extra = "import (\n" + "    ".join(f"{p}\n" for p in others) + ")\n" if others else ""
        defaults = _go_tests(defaults)
        body = f"{setup}\n{extra}{prompt.replace(imports, '') if imports else prompt}{code}"
        program, run = with_finish_line("go", body, test)
    elif language == "java":
        program, run = with_finish_line("java", f"{prompt}{code}", test, main_class="Main")
    else:
        # CodeGeeX's harness fails a program that prints anything: console.assert only prints.
        program, run = with_finish_line("javascript", f"{prompt}{code}", test, quiet_stdout=False)
        run = run.model_copy(update={"expected_stderr": ""})
    return Submission(id=identity, code=program, tests=[run], **defaults)


def multipl_e(record: dict[str, Any], identity: str, defaults: dict[str, Any]) -> Submission:
    code_name = str(record.get("language", ""))
    language = _MULTIPL_E_LANGUAGES.get(code_name)
    if language is None:
        known = ", ".join(sorted(_MULTIPL_E_LANGUAGES))
        raise DatasetError(f"MultiPL-E language {code_name!r} is not judged here (languages: {known})")
    prompt, tests = _text_field(record, "prompt"), _text_field(record, "tests")
    code = _text_field(record, "completion", "completions", "canonical_solution")
    defaults = {**defaults, "language": language}
    if language == "python":
        return _python_check("", prompt, code, tests, defaults, identity)
    if language == "go":
        defaults = _go_tests(defaults)
    # MultiPL-E runs Java with assertions on (its tests are assert statements) in class Problem.
    program, run = with_finish_line(
        language, f"{prompt}{code}", tests, main_class="Problem", java_assertions=language == "java"
    )
    return Submission(id=identity, code=program, tests=[run], **defaults)


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles strings, numbers and containers; any class or function is refused, so a test
    file cannot run code here."""

    def find_class(self, module: str, name: str) -> Any:
        raise DatasetError(f"the private tests hold a {module}.{name}; only plain values are read")


def _inflated(text: str) -> bytes:
    inflater = zlib.decompressobj()
    data = inflater.decompress(base64.b64decode(text, validate=True), MAX_INFLATED_BYTES)
    if inflater.unconsumed_tail:
        raise DatasetError(f"the private tests inflate beyond {MAX_INFLATED_BYTES >> 20} MiB")
    return data


def _test_cases(value: Any, what: str) -> list[dict[str, Any]]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        try:
            value = load_json(value)
        except ValueError:
            try:
                value = _PlainUnpickler(io.BytesIO(_inflated(value))).load()
            except (ValueError, pickle.UnpicklingError, zlib.error, EOFError) as exc:
                raise DatasetError(f"{what} are neither JSON nor base64 + zlib + pickle: {exc}") from None
            if isinstance(value, (str, bytes)):
                value = load_json(value)
    if not isinstance(value, list) or not all(isinstance(case, dict) for case in value):
        raise DatasetError(f"{what} must be a list of test cases")
    return value


def livecodebench(record: dict[str, Any], identity: str, defaults: dict[str, Any]) -> Submission:
    cases = _test_cases(record.get("public_test_cases"), "public_test_cases")
    cases += _test_cases(record.get("private_test_cases"), "private_test_cases")
    if not cases:
        raise DatasetError("no test cases in public_test_cases or private_test_cases")
    metadata = record.get("metadata") or {}
    if isinstance(metadata, str):
        metadata = load_json(metadata) if metadata.strip() else {}
    code = _text_field(record, "completion", "code", "code_list")
    code = extract_code(code, str(defaults.get("language", "python")))
    functional = [case.get("testtype") == "functional" for case in cases]
    if any(functional) and not all(functional):
        raise DatasetError("a problem's test cases are all functional or all stdin")
    if all(functional):
        name = metadata.get("func_name") if isinstance(metadata, dict) else None
        if not isinstance(name, str):
            raise DatasetError("functional test cases need metadata.func_name")
        tests = [
            CallTest(
                args=[load_json(line) for line in str(case["input"]).split("\n") if line.strip()],
                expected=load_json(str(case["output"])),
            )
            for case in cases
        ]
        return Submission(id=identity, code=code, tests=tests, fn_name=name, **defaults)
    tests_ = [StdinTest(input=str(case["input"]), expected_output=str(case["output"])) for case in cases]
    return Submission(id=identity, code=code, tests=tests_, **defaults)


def _io_tests(record: dict[str, Any], field: str) -> list[StdinTest]:
    group = record.get(field) or {}
    if not isinstance(group, dict):
        raise DatasetError(f"{field} must be an object with 'input' and 'output' lists")
    inputs, outputs = group.get("input") or [], group.get("output") or []
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise DatasetError(f"{field} needs 'input' and 'output' lists of one length")
    return [StdinTest(input=str(i), expected_output=str(o)) for i, o in zip(inputs, outputs, strict=True)]


def _contest_limits(record: dict[str, Any]) -> Limits | None:
    limit = record.get("time_limit")
    seconds = None
    if isinstance(limit, dict):
        seconds = float(limit.get("seconds") or 0) + float(limit.get("nanos") or 0) / 1e9
    memory = record.get("memory_limit_bytes")
    fields: dict[str, Any] = {}
    if seconds:
        fields["time_s"] = seconds
    if isinstance(memory, int) and memory > 0:
        fields["memory_mb"] = max(1, math.ceil(memory / (1 << 20)))
    return Limits(**fields) if fields else None


def code_contests(record: dict[str, Any], identity: str, defaults: dict[str, Any]) -> Submission:
    tests = [
        test for field in ("public_tests", "private_tests", "generated_tests") for test in _io_tests(record, field)
    ]
    if not tests:
        raise DatasetError("no tests in public_tests, private_tests or generated_tests")
    defaults = dict(defaults)
    if "completion" in record:
        code = extract_code(_text_field(record, "completion"), str(defaults["language"]))
    else:
        solutions = record.get("solutions") or {}
        languages, texts = solutions.get("language") or [], solutions.get("solution") or []
        chosen = next(
            ((code_, text) for code_, text in zip(languages, texts, strict=False) if code_ in _CODE_CONTESTS_LANGUAGES),
            None,
        )
        if chosen is None:
            raise DatasetError("no completion, and no solution in a language Airlock runs (C++, Python 3, Java)")
        defaults["language"] = _CODE_CONTESTS_LANGUAGES[chosen[0]]
        code = str(chosen[1])
    limits = _contest_limits(record)
    if limits is not None and "limits" not in defaults:
        defaults["limits"] = limits
    return Submission(id=identity, code=code, tests=tests, **defaults)


# BigCodeBench's tests patch the program's modules and inspect the mocks, so they must run in the
# program's process: this driver runs one method of ``TestCases`` there, as BigCodeBench's harness
# does (one module ``__test__`` holding the program and the test, no stdin). Its pass is a finish
# line as ``_finish_line`` draws them (``ok`` and a secret read before any of the program runs; the
# program's stdout goes to stderr), and the test framework's classes must be unchanged after the
# run; a failed assertion prints ``failed:`` and its message, anything else exits 1. A program
# that attacks the driver inside its own process can still pass (as in BigCodeBench's harness).
_BIGCODEBENCH_DRIVER = """\
import builtins, os, sys, traceback, types, unittest
import unittest.case, unittest.result, unittest.suite


def _framework():
    classes = (unittest.case.TestCase, unittest.case._Outcome, unittest.result.TestResult, unittest.suite.TestSuite)
    return [(cls, dict(vars(cls))) for cls in classes]


def _judge(source):
    nonce, _, method = sys.stdin.readline().strip().partition(" ")
    verdict, report = os.fdopen(os.dup(1), "w"), os.fdopen(os.dup(2), "w")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    before = _framework()
    module = types.ModuleType("__test__")
    module.__dict__.update(
        {"__builtins__": builtins, "__file__": "__test__.py", "__package__": None, "__doc__": None,
         "sys": sys, "os": os, "environ": os.environ}
    )
    result = unittest.TestResult()
    try:
        exec(compile(source, "__test__.py", "exec"), module.__dict__)
        sys.modules["__test__"] = module
        cases = module.TestCases
        suite = unittest.TestSuite([cases(method)]) if method else unittest.TestLoader().loadTestsFromTestCase(cases)
        suite.run(result)
    except BaseException:
        report.write(traceback.format_exc())
        report.flush()
        os._exit(1)
    if [(cls, dict(vars(cls))) for cls, _ in before] != before:
        report.write("the program changed the test framework (unittest) while its tests ran\\n")
        report.flush()
        os._exit(1)
    for _, trace in result.errors + result.failures:
        report.write(trace)
    report.flush()
    if result.errors:
        os._exit(1)
    if result.failures:
        verdict.write("failed: " + result.failures[0][1].strip().splitlines()[-1] + "\\n")
    else:
        verdict.write(f"ok {nonce}\\n" if result.testsRun else "failed: no test ran\\n")
    verdict.flush()
    os._exit(0)


_judge(%r)
"""


def _bigcodebench_methods(test: str) -> list[str]:
    """The ``test*`` methods of the test's ``TestCases`` and of the classes it defines that it
    derives from, in the order unittest runs them (empty when they are made some other way:
    then one test runs the class)."""
    try:
        tree = ast.parse(test)
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise DatasetError(f"BigCodeBench's test is not Python: {exc}") from None
    classes = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    if "TestCases" not in classes:
        raise DatasetError("BigCodeBench's test defines no TestCases class")
    methods: set[str] = set()
    pending, seen = ["TestCases"], set()
    while pending:
        node = classes.get(pending.pop())
        if node is None or node.name in seen:
            continue
        seen.add(node.name)
        methods.update(
            item.name
            for item in node.body
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test")
        )
        pending.extend(base.id for base in node.bases if isinstance(base, ast.Name))
    return sorted(methods)


def bigcodebench(record: dict[str, Any], identity: str, defaults: dict[str, Any]) -> Submission:
    test = _text_field(record, "test")
    methods = _bigcodebench_methods(test)
    if "solution" in record or "completion" in record:
        solution = (
            _text_field(record, "solution")
            if "solution" in record
            else _text_field(record, "complete_prompt") + _text_field(record, "completion")
        )
        # BigCodeBench's evaluation is calibrated by default: the prompt's imports and signature
        # first, so a solution that gives only the body still has them.
        solution = f"{_text_field(record, 'code_prompt')}\n    pass\n{solution}"
    else:
        solution = f"{_text_field(record, 'complete_prompt')}\n{_text_field(record, 'canonical_solution')}"
    tests = finish_line_tests(methods or [""])
    driver = _BIGCODEBENCH_DRIVER % (f"{solution}\n{test}",)
    return Submission(id=identity, code=driver, tests=tests, **{**defaults, "language": "python"})
