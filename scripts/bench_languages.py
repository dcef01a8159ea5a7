"""What a language costs: a 10-test stdin problem in every language, through the engine, against
a naive judge that starts one `docker run` per test (each compiling the program again, since
nothing survives a container).

Prints, per language, the median time to judge 1 and 10 tests (the difference is the cost of
nine more tests: a process each, no compiler, no container), the per-test cost, and the
10-test problem's time against the naive judge's, as a ratio.
Usage: scripts/bench languages [ROUNDS]
"""

from __future__ import annotations

import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_rounds import rounds_argument

from engine import Limits, Settings, StdinTest, Submission, SyncEngine
from engine._languages import toolchain
from engine.runtime._images import IMAGES, build_images, image_tag

SUM = {
    "python": "a, b = map(int, input().split())\nprint(a + b)\n",
    "c": '#include <stdio.h>\nint main(void){long a,b;scanf("%ld %ld",&a,&b);printf("%ld\\n",a+b);}',
    "cpp": "#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a+b<<std::endl;}",
    "java": "import java.util.*;\nclass Main { public static void main(String[] x) {"
    " Scanner s = new Scanner(System.in); System.out.println(s.nextLong() + s.nextLong()); } }",
    "javascript": "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
    "console.log(a + b);",
    "typescript": "const t: string = require('fs').readFileSync(0, 'utf8');\n"
    "const [a, b]: number[] = t.trim().split(/\\s+/).map(Number);\nconsole.log(a + b);",
    "go": 'package main\nimport "fmt"\nfunc main() { var a, b int64; fmt.Scan(&a, &b); fmt.Println(a + b) }',
    "rust": "use std::io::Read;\nfn main() { let mut s = String::new();"
    " std::io::stdin().read_to_string(&mut s).unwrap();"
    " let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();"
    ' println!("{}", v[0] + v[1]); }',
}
LIMITS = Limits(compile_time_s=60, wall_time_s=10)
NAIVE = ("cpp", "java")


def problem(language: str, tests: int) -> Submission:
    cases = [StdinTest(input=f"{i} {i}", expected_output=str(2 * i)) for i in range(tests)]
    return Submission(language=language, code=SUM[language], tests=cases, limits=LIMITS)


def median_s(engine: SyncEngine, submission: Submission, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        result = engine.judge(submission)
        times.append(time.perf_counter() - started)
        assert result.verdict.value == "passed", (submission.language, result.first_failure)
    return statistics.median(times)


def naive_per_test_s(language: str, tests: int) -> float:
    """One hardened-enough `docker run` per test, compiling and running in it."""
    commands = toolchain(language).commands_for(SUM[language])
    assert commands is not None
    steps = [
        shlex.join(part.replace("{dir}", "/tmp").replace("{source}", f"/tmp/{commands.source}") for part in argv)
        for argv in (commands.compile, commands.run)
        if argv
    ]
    source = f"cat > /tmp/{commands.source} <<'EOF'\n{SUM[language]}\nEOF\n"
    script = source + " && ".join([*steps[:-1], steps[-1] + " < /tmp/in"])
    image = image_tag(toolchain(language).image, Settings())
    started = time.perf_counter()
    for i in range(tests):
        ran = subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                "-i",
                "--network",
                "none",
                "--tmpfs",
                "/tmp:exec",
                "--entrypoint",
                "sh",
                image,
                "-c",
                f"printf '{i} {i}' > /tmp/in && {script}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert ran.stdout.strip() == str(2 * i), (language, ran.stdout, ran.stderr[-500:])
    return time.perf_counter() - started


def main() -> None:
    rounds = rounds_argument(__doc__, 3)
    build_images(Settings(), IMAGES, log=lambda line: None)
    print(f"{'language':11} {'1 test ms':>10} {'10 tests ms':>12} {'per test ms':>12} {'naive 10 ms':>12} {'ratio':>6}")
    with SyncEngine(Settings(pool_size=0)) as engine:
        for language in SUM:
            engine.judge(problem(language, 1))  # the image's first use (the OCI runtime unpacks it)
            one = median_s(engine, problem(language, 1), rounds)
            ten = median_s(engine, problem(language, 10), rounds)
            naive = naive_per_test_s(language, 10) if language in NAIVE else None
            shown = f"{naive * 1000:12.0f} {naive / ten:5.1f}x" if naive else f"{'':12} {'':6}"
            print(
                f"{language:11} {one * 1000:10.0f} {ten * 1000:12.0f} {(ten - one) / 9 * 1000:12.1f} {shown}",
                flush=True,
            )


if __name__ == "__main__":
    main()
