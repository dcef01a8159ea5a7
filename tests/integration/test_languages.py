"""Every language through `airlock score`: a correct, a wrong, a crashing, a slow, a memory-hungry
and a non-compiling program each get their verdict, on both tests of a small stdin problem."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sandboxes import cheapest

from engine import Limits, Settings, SyncEngine
from engine._languages import LANGUAGE_NAMES, TOOLCHAINS

pytestmark = pytest.mark.docker

TESTS = [
    {"kind": "stdin", "input": "1 2\n", "expected_output": "3\n"},
    {"kind": "stdin", "input": "20 22\n", "expected_output": "42\n"},
]
LIMITS = Limits(wall_time_s=3, compile_time_s=30, memory_mb=512, tmpfs_mb=64)
# Filling the memory can take more CPU time than the others' limit: the kernel's work on the pages
# counts as the program's, and grows when other containers fill theirs at once (Go took 0.1 s
# alone and up to 3.1 s beside five others here). The programs that fill it get a limit of their own.
HUNGRY_LIMITS = LIMITS.with_time(30.0)

# language -> kind of program -> (code, the verdict it must get)
PROGRAMS: dict[str, dict[str, tuple[str, str]]] = {
    "c": {
        "correct": (
            '#include <stdio.h>\nint main(void){long a,b;scanf("%ld %ld",&a,&b);printf("%ld\\n",a+b);}',
            "passed",
        ),
        "wrong": (
            '#include <stdio.h>\nint main(void){long a,b;scanf("%ld %ld",&a,&b);printf("%ld\\n",a-b);}',
            "wrong_answer",
        ),
        "crash": ("#include <stdlib.h>\nint main(void){abort();}", "runtime_error"),
        "slow": ("int main(void){volatile long i=0;for(;;)i++;}", "timeout"),
        "hungry": (
            "#include <stdlib.h>\n#include <string.h>\n"
            "int main(void){for(;;){char*p=malloc(1<<24);memset(p,1,1<<24);}}",
            "memory_limit",
        ),
        "broken": ("int main(void){ return 0 }", "compile_error"),
    },
    "cpp": {
        "correct": ("#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a+b<<std::endl;}", "passed"),
        "wrong": (
            "#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a*b<<std::endl;}",
            "wrong_answer",
        ),
        "crash": ('#include <stdexcept>\nint main(){throw std::runtime_error("no");}', "runtime_error"),
        "slow": ("int main(){volatile long i=0;for(;;)i++;}", "timeout"),
        "hungry": (
            "#include <vector>\nint main(){std::vector<std::vector<char>> v;for(;;)v.emplace_back(1<<24,1);}",
            "memory_limit",
        ),
        "broken": ("int main(){ undeclared(); }", "compile_error"),
    },
    "java": {
        "correct": (
            "import java.util.*;\npublic class Sum { public static void main(String[] a) {"
            " Scanner s = new Scanner(System.in); System.out.println(s.nextLong() + s.nextLong()); } }",
            "passed",
        ),
        "wrong": (
            "import java.util.*;\nclass Main { public static void main(String[] a) {"
            " Scanner s = new Scanner(System.in); System.out.println(s.nextLong()); } }",
            "wrong_answer",
        ),
        "crash": (
            "class Main { public static void main(String[] a) { int[] x = new int[1]; x[2] = 1; } }",
            "runtime_error",
        ),
        "slow": ("class Main { public static void main(String[] a) { long i = 0; while (true) i++; } }", "timeout"),
        "hungry": (
            "import java.util.*;\nclass Main { public static void main(String[] a) {"
            " List<long[]> k = new ArrayList<>(); while (true) k.add(new long[1 << 21]); } }",
            "memory_limit",
        ),
        "broken": ("class Main { public static void main(String[] a) { int x = ; } }", "compile_error"),
        # A public class in a comment or a text block names no file.
        "decoy": (
            'import java.util.*;\n/*\npublic class Decoy {}\n*/\nclass Main {\n  static String note = """\n'
            'public class Decoy {}\n""";\n  public static void main(String[] a) {'
            " Scanner s = new Scanner(System.in); System.out.println(s.nextLong() + s.nextLong()); } }",
            "passed",
        ),
    },
    "javascript": {
        "correct": (
            "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
            "console.log(a + b);",
            "passed",
        ),
        "wrong": ("console.log(3);", "wrong_answer"),
        "crash": ("throw new Error('no');", "runtime_error"),
        "slow": ("for (;;) {}", "timeout"),
        "hungry": ("const kept = []; for (;;) kept.push(Buffer.alloc(1 << 24, 1));", "memory_limit"),
        "broken": ("const = 1;", "runtime_error"),  # no compile step: a syntax error fails at run time
    },
    "typescript": {
        "correct": (
            "const text: string = require('fs').readFileSync(0, 'utf8');\n"
            "const [a, b]: number[] = text.trim().split(/\\s+/).map(Number);\nconsole.log(a + b);",
            "passed",
        ),
        "wrong": ("const answer: number = 41;\nconsole.log(answer);", "wrong_answer"),
        "crash": ("function fail(): never { throw new Error('no'); }\nfail();", "runtime_error"),
        "slow": ("let i: number = 0;\nfor (;;) { i++; }", "timeout"),
        "hungry": ("const kept: Buffer[] = [];\nfor (;;) kept.push(Buffer.alloc(1 << 24, 1));", "memory_limit"),
        "broken": ("let x: number = ;", "compile_error"),
    },
    "go": {
        "correct": (
            'package main\nimport "fmt"\nfunc main() { var a, b int64; fmt.Scan(&a, &b); fmt.Println(a + b) }',
            "passed",
        ),
        "wrong": ('package main\nimport "fmt"\nfunc main() { fmt.Println(0) }', "wrong_answer"),
        "crash": ('package main\nfunc main() { var m map[string]int; m["x"] = 1 }', "runtime_error"),
        "slow": ("package main\nfunc main() { i := 0; for { i++ } }", "timeout"),
        "hungry": (
            "package main\nfunc main() { var kept [][]byte; for { b := make([]byte, 1<<24);"
            " for i := 0; i < len(b); i += 4096 { b[i] = 1 }; kept = append(kept, b) } }",
            "memory_limit",
        ),
        "broken": ("package main\nfunc main() { undefined() }", "compile_error"),
    },
    "rust": {
        "correct": (
            "use std::io::Read;\nfn main() { let mut s = String::new();"
            " std::io::stdin().read_to_string(&mut s).unwrap();"
            " let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();"
            ' println!("{}", v[0] + v[1]); }',
            "passed",
        ),
        "wrong": ('fn main() { println!("7"); }', "wrong_answer"),
        "crash": ('fn main() { panic!("no"); }', "runtime_error"),
        "slow": (
            'fn main() { let mut i: u64 = 1; while i != 0 { i = i.wrapping_add(2); } println!("{}", i); }',
            "timeout",
        ),
        "hungry": ("fn main() { let mut kept = Vec::new(); loop { kept.push(vec![1u8; 1 << 24]); } }", "memory_limit"),
        "broken": ('fn main() { let x: i32 = "text"; }', "compile_error"),
    },
}


CALL_TESTS = [
    {"kind": "call", "args": [1, 2], "expected": 3},
    {"kind": "call", "args": [20, 22], "expected": 42},
]
ASSERT_TESTS = {
    "python": [
        {"kind": "assert", "code": "assert add(1, 2) == 3"},
        {"kind": "assert", "code": "assert add(20, 22) == 42"},
    ],
    "javascript": [
        {"kind": "assert", "code": "const assert = require('node:assert');\nassert.strictEqual(add(1, 2), 3);"},
        {
            "kind": "assert",
            "code": "const assert = require('node:assert');\nassert.deepStrictEqual([add(20, 22)], [42]);",
        },
    ],
}
# language -> kind of program -> (code of `add`, the verdict it must get), for call and assert tests
FUNCTIONS: dict[str, dict[str, tuple[str, str]]] = {
    "python": {
        "correct": ("def add(a, b):\n    return a + b", "passed"),
        "wrong": ("def add(a, b):\n    return a - b", "wrong_answer"),
        "crash": ("def add(a, b):\n    raise ValueError('no')", "runtime_error"),
        "slow": ("def add(a, b):\n    while True:\n        pass", "timeout"),
        "hungry": (
            "def add(a, b):\n    kept = []\n    while True:\n        kept.append(bytearray(1 << 24))",
            "memory_limit",
        ),
        "broken": ("def add(a, b)\n    return a + b", "compile_error"),
    },
    "javascript": {
        "correct": ("function add(a, b) { return a + b; }", "passed"),
        "wrong": ("const add = (a, b) => a - b;", "wrong_answer"),
        "crash": ("function add(a, b) { throw new Error('no'); }", "runtime_error"),
        "slow": ("function add(a, b) { for (;;) {} }", "timeout"),
        "hungry": (
            "function add(a, b) { const kept = []; for (;;) kept.push(Buffer.alloc(1 << 24, 1)); }",
            "memory_limit",
        ),
        "broken": ("function add(a, b) { return a + ; }", "compile_error"),
    },
}


def score(records: list[dict[str, Any]], tmp_path: Path) -> dict[str, tuple[str, list[str], dict[str, Any]]]:
    """Each record's verdict, its tests' verdicts and its first test, through `airlock score`."""
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text("".join(json.dumps(record) + "\n" for record in records))
    results = tmp_path / "results.jsonl"
    limits = ["--wall-time-s", str(LIMITS.wall_time_s), "--compile-time-s", str(LIMITS.compile_time_s)]
    # The verdicts are what is compared: the cheapest sandbox here (the walls have test_language_attacks).
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine",
            "score",
            str(dataset),
            "-o",
            str(results),
            "-q",
            *limits,
            *cheapest().cli_flags(),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert ran.returncode in (0, 1), ran.stderr[-3000:]
    verdicts = {}
    for line in results.read_text().splitlines():
        result = json.loads(line)
        verdicts[result["id"]] = (result["verdict"], [t["verdict"] for t in result["tests"]], result["tests"][0])
    return verdicts


def test_call_and_assert_tests_in_python_and_javascript_get_every_verdict(
    language_images: None, tmp_path: Path
) -> None:
    hungry = {"limits": HUNGRY_LIMITS.model_dump()}
    records: list[dict[str, Any]] = [
        {
            "id": f"{language}/{kind}/{tests}",
            "language": language,
            "code": code,
            **({"fn_name": "add", "tests": CALL_TESTS} if tests == "call" else {"tests": ASSERT_TESTS[language]}),
            **(hungry if kind == "hungry" else {}),
        }
        for language, programs in FUNCTIONS.items()
        for kind, (code, _) in programs.items()
        for tests in ("call", "assert")
    ]
    verdicts = score(records, tmp_path)
    problems = []
    for record in records:
        expected = FUNCTIONS[record["language"]][record["id"].split("/")[1]][1]
        verdict, per_test, first = verdicts[record["id"]]
        if verdict != expected or len(per_test) != 2:
            detail = (first.get("error") or {}).get("message") or first.get("detail")
            problems.append(f"{record['id']}: {verdict} {per_test}, expected {expected}: {str(detail)[:300]}")
    assert not problems, "\n".join(problems)


def test_every_language_gets_every_verdict_through_airlock_score(language_images: None, tmp_path: Path) -> None:
    hungry = {"limits": HUNGRY_LIMITS.model_dump()}
    records = [
        {
            "id": f"{language}/{kind}",
            "language": language,
            "code": code,
            "tests": TESTS,
            **(hungry if kind == "hungry" else {}),
        }
        for language, programs in PROGRAMS.items()
        for kind, (code, _) in programs.items()
    ]
    verdicts = score(records, tmp_path)
    problems = []
    for language, programs in PROGRAMS.items():
        for kind, (_, expected) in programs.items():
            verdict, per_test, first = verdicts[f"{language}/{kind}"]
            if verdict != expected or len(per_test) != len(TESTS):
                detail = (first.get("error") or {}).get("message") or first.get("stderr") or first.get("detail")
                problems.append(f"{language}/{kind}: {verdict} {per_test}, expected {expected}: {str(detail)[:300]}")
    assert not problems, "\n".join(problems)
    compile_error = verdicts["cpp/broken"][2]["error"]
    assert "undeclared" in compile_error["message"]


def test_an_unknown_language_and_a_test_kind_it_lacks_are_named(engine: SyncEngine) -> None:
    from engine import Submission

    with pytest.raises(ValueError, match="language\n  Input should be 'python', 'c', 'cpp', 'java'"):
        Submission.model_validate({"language": "cobol", "code": "x", "tests": TESTS})
    with pytest.raises(ValueError, match="cpp programs take run, stdin tests, not call tests"):
        Submission.model_validate(
            {"language": "cpp", "code": "x", "fn_name": "f", "tests": [{"kind": "call", "args": [], "expected": 1}]}
        )


def test_a_program_that_rewrites_its_own_files_fails_the_tests_after(language_images: None) -> None:
    """A test that changes what the next one runs (its source, or the binary the compiler made)
    could carry state across tests: the harness notices, and the later tests fail."""
    with SyncEngine(Settings(pool_size=0)) as engine:
        from engine import Submission

        tests = [{"kind": "stdin", "input": "", "expected_output": "fresh\n"}] * 3
        script = (
            "const fs = require('fs');\nconsole.log('fresh');\n"
            "fs.writeFileSync(__filename, \"console.log('fresh'); // changed\\n\");"
        )
        binary = (
            "#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\nint main(int c, char **v) {"
            ' puts("fresh"); fflush(stdout); char cmd[4096];'
            ' snprintf(cmd, sizeof cmd, "cp /proc/%d/exe %s.new && mv %s.new %s", getpid(), v[0], v[0], v[0]);'
            " return system(cmd); }"
        )
        for language, code in (("javascript", script), ("c", binary)):
            result = engine.judge(Submission.model_validate({"language": language, "code": code, "tests": tests}))
            verdicts = [test.verdict.value for test in result.tests]
            assert verdicts == ["passed", "runtime_error", "runtime_error"], (language, verdicts, result.tests[1])
            error = result.tests[1].error
            assert error is not None and error.type == "ProgramChanged"


def test_a_c_or_cpp_submission_picks_its_standard(language_images: None, engine: SyncEngine) -> None:
    from engine import Submission

    spaceship = (
        "#include <compare>\n#include <cstdio>\n"
        'int main() { auto order = 1 <=> 2; std::puts(order < 0 ? "less" : "more"); }'
    )
    tests = [{"kind": "stdin", "input": "", "expected_output": "less\n"}]

    def verdict(standard: str | None) -> str:
        record = {"language": "cpp", "code": spaceship, "tests": tests, "standard": standard}
        return engine.judge(Submission.model_validate(record)).verdict.value

    assert verdict("c++20") == "passed"
    assert verdict("c++11") == "compile_error"
    assert verdict(None) == "compile_error"  # C++17, the default, has no <=>
    with pytest.raises(ValueError, match=re.escape("'c++99' is not a cpp standard: c++11, c++14")):
        Submission.model_validate({"language": "cpp", "code": "x", "tests": tests, "standard": "c++99"})
    with pytest.raises(ValueError, match="java has no standard to pick"):
        Submission.model_validate({"language": "java", "code": "x", "tests": tests, "standard": "17"})


def test_javascript_values_cross_as_the_codec_says(language_images: None, engine: SyncEngine) -> None:
    from engine import Submission

    code = (
        "function echo(x) { return x; }\n"
        "const special = () => [NaN, Infinity, -0, 2 ** 60 * 1024 ** 2, 10n ** 30n, 1.5, null, undefined];\n"
        "const kinds = () => ({ map: new Map([[1, 'a']]), set: new Set([2, 1]), bytes: Buffer.from('hi') });\n"
        "function bad() { return () => 1; }\n"
        "module.exports = { exported: (a, b) => `${typeof a} ${typeof b}` };\n"
    )
    big = 2**70 + 1
    cases = [
        ("echo", [[1, "two", [3.5, None], {"k": True}]], [1, "two", [3.5, None], {"k": True}]),
        ("echo", [big], big),  # past 2^53: BigInt there and back, exactly
        ("exported", [big, 7], "bigint number"),
    ]
    for name, args, expected in cases:
        submission = Submission(
            language="javascript", code=code, fn_name=name, tests=[{"kind": "call", "args": args, "expected": expected}]
        )
        result = engine.judge(submission)
        assert result.verdict == "passed", (name, result.tests[0].detail, result.tests[0].returned)
    special = engine.judge(
        Submission(
            language="javascript", code=code, fn_name="special", tests=[{"kind": "call", "args": [], "expected": 0}]
        )
    )
    assert special.tests[0].returned == ["nan", "inf", 0, 2**80, 10**30, 1.5, None, None], special.tests[0].returned
    kinds = engine.judge(
        Submission(
            language="javascript", code=code, fn_name="kinds", tests=[{"kind": "call", "args": [], "expected": 0}]
        )
    )
    assert kinds.verdict == "wrong_answer", kinds.tests[0].detail
    unjudgeable = engine.judge(
        Submission(language="javascript", code=code, fn_name="bad", tests=[{"kind": "call", "args": [], "expected": 0}])
    )
    assert unjudgeable.verdict == "runtime_error"
    assert "cannot be judged" in str(unjudgeable.tests[0].detail), unjudgeable.tests[0]


def test_every_toolchains_self_test_prints_hello(language_images: None, engine: SyncEngine) -> None:
    printed = {chain.language: engine.run(chain.hello, language=chain.language, limits=LIMITS) for chain in TOOLCHAINS}
    assert {language: run.stdout for language, run in printed.items()} == dict.fromkeys(LANGUAGE_NAMES, "hello\n"), {
        language: (run.outcome, run.stderr[:200]) for language, run in printed.items()
    }
