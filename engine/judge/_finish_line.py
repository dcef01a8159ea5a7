"""The finish line of a test program: the line that says its tests ran to their end.

HumanEval-X and MultiPL-E judge a compiled program by its exit status, so their own harnesses
pass a program that exits 0 before the tests finish (``exit(0)`` in the function under test,
``System.exit(0)``, ``process.exit(0)``, ``os.Exit(0)``): the cheapest forgery there is, and one a
model under RL finds. Here the test's own entry point is wrapped so that it prints ``ok`` and a
secret when it returns, and only then: the secret reaches it on stdin before any of the
program's functions run, the program's stdout goes to stderr (where the test's output stays
readable), and stdout carries the finish line alone. An early exit with any status, or text
that looks like a pass, fails. (Code that runs before the entry point, a C++ static initializer
or a Go ``init``, can still read stdin: forging from there is deliberate, not an accident.)
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from typing import Literal

from .._submission import RunTest
from ._record_values import DatasetError

__all__ = ["FinishedLanguage", "finish_line_tests", "with_finish_line"]

FinishedLanguage = Literal["cpp", "rust", "java", "javascript", "typescript", "go"]

_CPP_FINISH = """#include <unistd.h>
#include <fcntl.h>
#include <cstdio>
#include <iostream>
struct AirlockFinishLine {
    int out = -1;
    char nonce[64] = {0};
    AirlockFinishLine() {
        ssize_t got = 0, n;
        while (got < (ssize_t)sizeof nonce - 1 && (n = read(0, nonce + got, sizeof nonce - 1 - got)) > 0) {
            got += n;
            if (nonce[got - 1] == '\\n') break;
        }
        std::cout.flush();
        std::fflush(stdout);
        out = dup(1);
        dup2(2, 1);
    }
    ~AirlockFinishLine() {
        std::cout.flush();
        std::fflush(stdout);
        if (out >= 0) dprintf(out, "ok %s", nonce);
    }
};
"""
_CPP_MAIN = re.compile(r"\bint\s+main\s*\([^)]*\)\s*\{")

_RUST_FINISH = """
struct AirlockFinishLine { out: i32, nonce: String }
extern "C" { fn dup(fd: i32) -> i32; fn dup2(from: i32, to: i32) -> i32; }
impl AirlockFinishLine {
    fn start() -> Self {
        use std::io::{BufRead, Write};
        let mut nonce = String::new();
        let _ = std::io::stdin().lock().read_line(&mut nonce);
        let _ = std::io::stdout().flush();
        let out = unsafe { dup(1) };
        unsafe { dup2(2, 1) };
        AirlockFinishLine { out, nonce }
    }
}
impl Drop for AirlockFinishLine {
    fn drop(&mut self) {
        use std::io::Write;
        use std::os::unix::io::FromRawFd;
        let _ = std::io::stdout().flush();
        if self.out >= 0 && !std::thread::panicking() {
            let mut out = unsafe { std::fs::File::from_raw_fd(self.out) };
            let _ = write!(out, "ok {}", self.nonce);
        }
    }
}
"""
_RUST_MAIN = re.compile(r"\bfn\s+main\s*\(\s*\)\s*\{")

_JAVA_FINISH = """
public class AirlockFinishLine {
    public static void main(String[] args) throws Throwable {
        String nonce = new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
        java.io.PrintStream out = System.out;
        System.setOut(System.err);
        %s
        %s.main(args);
        System.err.flush();
        out.println("ok " + nonce);
        out.flush();
    }
}
"""
# Assertions are switched on before the test's class loads: the class's status is fixed then.
_JAVA_ASSERTIONS = "ClassLoader.getSystemClassLoader().setDefaultAssertionStatus(true);"
_JAVA_PUBLIC_CLASS = re.compile(r"\bpublic(\s+(?:final\s+)?class\s+)")

_JAVASCRIPT_START = 'const airlockNonce = require("fs").readFileSync(0, "utf8");\n'
_JAVASCRIPT_QUIET = "process.stdout.write = process.stderr.write.bind(process.stderr);\n"
_JAVASCRIPT_END = '\n;require("fs").writeSync(1, "ok " + airlockNonce);\n'

_GO_IMPORTS = 'import airlockbufio "bufio"\nimport airlockos "os"\nimport airlocktesting "testing"\n'
_GO_PACKAGE = re.compile(r"^package\s+\w+[ \t]*$", re.MULTILINE)
_GO_FINISH = """
func TestMain(m *airlocktesting.M) {
	nonce, _ := airlockbufio.NewReader(airlockos.Stdin).ReadString('\\n')
	out := airlockos.Stdout
	airlockos.Stdout = airlockos.Stderr
	code := m.Run()
	if code == 0 {
		out.WriteString("ok " + nonce)
	}
	airlockos.Exit(code)
}
"""


def finish_line_tests(arguments: Sequence[str] = ("",)) -> list[RunTest]:
    """One run test per argument, each passing on the finish line alone: one secret for all, on
    stdin before the argument (what the test program runs, as BigCodeBench's method name)."""
    nonce = secrets.token_hex(16)
    return [
        RunTest(stdin=f"{nonce} {argument}\n" if argument else f"{nonce}\n", expected_stdout=f"ok {nonce}\n")
        for argument in arguments
    ]


def _guarded_main(pattern: re.Pattern[str], test: str, guard: str, what: str) -> str:
    found = pattern.search(test)
    if found is None:
        raise DatasetError(f"the test has no {what} to run to its end")
    return f"{test[: found.end()]} {guard}{test[found.end() :]}"


def with_finish_line(
    language: FinishedLanguage,
    program: str,
    test: str,
    *,
    main_class: str = "Main",
    quiet_stdout: bool = True,
    java_assertions: bool = False,
) -> tuple[str, RunTest]:
    """``program`` followed by ``test``, with the test's entry point (``main``; Java's in
    ``main_class``; JavaScript's whole text; Go's test binary) made to print the finish line
    when it returns; and the run test that passes on that line alone. With ``quiet_stdout``
    false (JavaScript only) what the program prints stays on stdout and fails the test, as
    harnesses that judge by silence do."""
    (run,) = finish_line_tests()
    if language == "cpp":
        guarded = _guarded_main(_CPP_MAIN, test, "AirlockFinishLine airlock_finish_line;", "int main()")
        return f"{_CPP_FINISH}{program}\n{guarded}", run
    if language == "rust":
        guard = "let _airlock_finish_line = AirlockFinishLine::start();"
        return f"{program}\n{_guarded_main(_RUST_MAIN, test, guard, 'fn main()')}\n{_RUST_FINISH}", run
    if language == "java":
        if not re.search(rf"\bclass\s+{re.escape(main_class)}\b", f"{program}\n{test}"):
            raise DatasetError(f"the test has no class {main_class} to run to its end")
        # The finish line's class is the file's one public class, so the test's loses the word.
        source = _JAVA_PUBLIC_CLASS.sub(r"\1", f"{program}\n{test}")
        assertions = _JAVA_ASSERTIONS if java_assertions else ""
        return source + _JAVA_FINISH % (assertions, main_class), run
    if language in ("javascript", "typescript"):
        start = _JAVASCRIPT_START + (_JAVASCRIPT_QUIET if quiet_stdout else "")
        return f"{start}{program}\n{test}{_JAVASCRIPT_END}", run
    source = f"{program}\n{test}"
    package = _GO_PACKAGE.search(source)
    if package is None:
        raise DatasetError("the Go test has no package clause")
    if "func TestMain(" in test:
        raise DatasetError("the Go test has its own TestMain: its end cannot be told from an exit")
    return f"{source[: package.end()]}\n{_GO_IMPORTS}{source[package.end() :]}\n{_GO_FINISH}", run
