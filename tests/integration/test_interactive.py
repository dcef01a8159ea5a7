"""Interactive problems: an interactor judges by talking to the program, which never sees the
test's input. Judged through `airlock score` as a data set's author writes them: a guessing
game with a Python interactor and with a C++ one written with testlib.h."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sandboxes import cheapest

pytestmark = pytest.mark.docker

# Guess a number from 1 to 1000 in at most 10 questions ("? x" answered "<", ">" or "="), then
# "! x". The secret is the test's input, which only the interactor reads.
PYTHON_INTERACTOR = r"""
import sys
secret = int(open(sys.argv[1]).read())
for _ in range(11):
    line = sys.stdin.readline().split()
    if len(line) != 2 or line[0] not in "?!" or not line[1].lstrip("-").isdigit():
        print(f"wrong answer expected a question or a guess, got {line!r}", file=sys.stderr)
        sys.exit(1)
    kind, value = line[0], int(line[1])
    if kind == "!":
        if value == secret:
            sys.exit(0)
        print(f"wrong answer guessed {value}", file=sys.stderr)
        sys.exit(1)
    print("<" if secret < value else ">" if secret > value else "=", flush=True)
print("wrong answer more than 10 questions", file=sys.stderr)
sys.exit(1)
"""
CPP_INTERACTOR = r"""
#include "testlib.h"
#include <iostream>
int main(int argc, char* argv[]) {
    registerInteraction(argc, argv);
    int secret = inf.readInt(1, 1000, "secret");
    for (int asked = 0; asked <= 10; asked++) {
        std::string kind = ouf.readToken();
        int value = ouf.readInt(-1000000, 1000000, "value");
        if (kind == "!") {
            if (value != secret) quitf(_wa, "guessed %d", value);
            tout << asked << std::endl;
            quitf(_ok, "found %d in %d questions", secret, asked);
        }
        if (kind != "?") quitf(_pe, "expected ? or !, got %s", kind.c_str());
        if (asked == 10) break;
        std::cout << (secret < value ? "<" : secret > value ? ">" : "=") << std::endl;
    }
    quitf(_wa, "more than 10 questions");
}
"""
BINARY_SEARCH = """
lo, hi = 1, 1000
while True:
    mid = (lo + hi) // 2
    print("?", mid, flush=True)
    answer = input()
    if answer == "=":
        print("!", mid, flush=True)
        break
    lo, hi = (lo, mid - 1) if answer == "<" else (mid + 1, hi)
"""
BINARY_SEARCH_CPP = """
#include <iostream>
#include <string>
int main() {
    int lo = 1, hi = 1000;
    while (true) {
        int mid = (lo + hi) / 2;
        std::cout << "? " << mid << std::endl;
        std::string answer;
        std::cin >> answer;
        if (answer == "=") { std::cout << "! " << mid << std::endl; return 0; }
        if (answer == "<") hi = mid - 1; else lo = mid + 1;
    }
}
"""
# Asks 1, 2, 3, ...: right in the end, but past the limit of questions for a large secret.
LINEAR = """
x = 1
while True:
    print("?", x, flush=True)
    if input() == "=":
        print("!", x, flush=True)
        break
    x += 1
"""
# Looks for the secret everywhere a program could, then guesses what it found (or 1).
PEEK = """
import os
found = "1"
for root in ("/tmp", "/dev/shm", "/proc/1", "/proc/self", "/run", "/home", "/opt"):
    for folder, _, names in os.walk(root):
        for name in names:
            try:  # without waiting on a pipe (its own stdin is one)
                fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NONBLOCK)
                text = os.read(fd, 4096).decode("latin-1")
                os.close(fd)
            except OSError:
                continue
            if text.strip() == "737":
                found = "737"
print("!", found, flush=True)
"""
SECRETS = ["737", "1", "1000", "512"]


def record(name: str, code: str, interactor: dict[str, Any], language: str = "python") -> dict[str, Any]:
    tests = [{"kind": "stdin", "input": secret} for secret in SECRETS]
    return {"id": name, "language": language, "code": code, "tests": tests, "interactor": interactor}


def test_a_guessing_game_judged_by_python_and_cpp_interactors(tmp_path: Path) -> None:
    python, cpp = {"code": PYTHON_INTERACTOR}, {"language": "cpp", "code": CPP_INTERACTOR}
    records = [
        record("right", BINARY_SEARCH, python),
        record("right-cpp", BINARY_SEARCH_CPP, cpp, language="cpp"),
        record("right-against-testlib", BINARY_SEARCH, cpp),
        record("too-many-questions", LINEAR, python),
        record("peek", PEEK, python),
        record("crash", "print('?', 500, flush=True)\nraise SystemExit(input() + 1)", python),
    ]
    data, out = tmp_path / "interactive.jsonl", tmp_path / "results.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    completed = subprocess.run(
        [sys.executable, "-m", "engine", "score", str(data), "-o", str(out), "-q", *cheapest().cli_flags()],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    results = {line["id"]: line for line in map(json.loads, out.read_text().splitlines())}
    verdicts = {name: [t["verdict"] for t in result["tests"]] for name, result in results.items()}

    assert verdicts["right"] == ["passed"] * 4
    assert verdicts["right-cpp"] == ["passed"] * 4
    assert verdicts["right-against-testlib"] == ["passed"] * 4
    # Counting finds 1 within 10 questions, and no other secret. The program's crash on the
    # input that ended after the interactor's verdict does not hide that verdict.
    assert verdicts["too-many-questions"] == ["wrong_answer", "passed", "wrong_answer", "wrong_answer"]
    assert "more than 10 questions" in results["too-many-questions"]["tests"][0]["detail"]
    assert verdicts["peek"] == ["wrong_answer", "passed", "wrong_answer", "wrong_answer"]
    assert "guessed 1" in results["peek"]["tests"][0]["detail"]
    # The program's own crash is its verdict, whatever the interactor then made of the silence.
    assert verdicts["crash"] == ["runtime_error"] * 4
