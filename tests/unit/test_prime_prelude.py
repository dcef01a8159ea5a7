"""The verl prelude a program gets: the reference's lines for every name it names, in place.

``tests/compat/test_prime_differential.py`` runs the same programs under the real reference;
these pin down which lines a program keeps (each dropped line is a module a container does not
import), with the exports of this interpreter written as the image build writes them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.harness import worker_prime


@pytest.fixture(autouse=True)
def exports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = tmp_path / "prelude-exports.json"
    written.write_text(json.dumps(worker_prime.star_exports()))
    monkeypatch.setattr(worker_prime, "EXPORTS_FILE", str(written))
    monkeypatch.setattr(worker_prime, "_preludes", {})


def kept(code: str, fn_name: str | None = None) -> list[str]:
    prelude = worker_prime.prelude_for(code, fn_name)
    assert prelude.count("\n") == worker_prime.PRELUDE.count("\n"), "the program's line numbers moved"
    return [line for line in prelude.splitlines() if line]


ALWAYS = ["from sys import *", "from builtins import *", "import sys", "sys.setrecursionlimit(6*10**5)"]


def test_a_program_naming_nothing_of_the_prelude_imports_none_of_it() -> None:
    # sys and builtins are in every process; their star imports bind what they hold then.
    assert kept("def f(x):\n    return x * 2\n", "f") == ALWAYS


def test_each_name_keeps_the_line_that_binds_it_last() -> None:
    lines = kept("print(Counter('ab'), pow(2, 3), sqrt(4), time, copy, statistics)\n")
    # Counter: typing's (after collections'); pow: builtins' (after math's); time: datetime's
    # class; copy and statistics: the modules (their imports come after every star import).
    assert lines == [
        "from datetime import *",
        "from math import *",
        "from sys import *",
        "from builtins import *",
        "from typing import *",
        "import copy",
        "import statistics",
        "import sys",
        "sys.setrecursionlimit(6*10**5)",
    ]
    assert worker_prime.preloaded("print(sqrt(4))\n", "f") == ("math", "sys")


def test_a_function_found_by_name_only_keeps_its_line() -> None:
    assert "from math import *" in kept("x = 1\n", "gcd")


@pytest.mark.parametrize(
    "code",
    [
        "print(globals()['deque'])\n",
        "def f(x):\n    return eval(x)\n",
        "import sys\nprint(sys.modules['tmp_sol'].gcd)\n",
        "import typing\ndef g(x: 'Deque[int]'): pass\nprint(typing.get_type_hints(g))\n",
        "from __future__ import annotations\n",
        "def f(:\n",
    ],
    ids=["globals", "eval", "sys.modules", "string annotations", "future annotations", "no compile"],
)
def test_a_program_that_can_reach_names_it_does_not_name_gets_the_whole_prelude(code: str) -> None:
    assert worker_prime.prelude_for(code, "f") == worker_prime.PRELUDE


def test_without_the_images_exports_every_program_gets_the_whole_prelude(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_prime, "EXPORTS_FILE", "/nonexistent/prelude-exports.json")
    assert worker_prime.prelude_for("print(1)\n", None) == worker_prime.PRELUDE


@pytest.mark.parametrize(
    ("code", "opens"),
    [
        ("import sys\na, b = map(int, input().split())\nprint(a + b)\n", False),
        ("print(open(0).read())\n", True),
        ("import io\nprint(io.open(0).read())\n", True),
        ("x = int(input())\nimport numpy\nprint(x)\n", True),
        ("print(globals()['open'])\n", True),
    ],
    ids=["reads input", "names open", "an attribute named open", "imports in its body", "may reach any name"],
)
def test_a_standard_input_program_gets_unittest_mock_where_it_may_reach_open(code: str, opens: bool) -> None:
    assert worker_prime.may_open(code) is opens
    assert ("unittest.mock" in worker_prime.preloaded(code, None)) is opens
