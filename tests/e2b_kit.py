"""One conformance kit for what E2B's SDKs do with a sandbox, run against both ways Airlock
offers them: the unmodified SDK through ``airlock serve`` (tests/integration/test_e2b.py) and
the in-process drop-in ``engine.compat.e2b_code_interpreter`` (tests/compat). The same checks, so
the two translations of E2B cannot drift apart."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest


def _kind(entry: Any) -> str:
    """An entry's type as text: the SDK's FileType enum, or the drop-in's literal."""
    return str(getattr(entry.type, "value", entry.type))


def check_code_interpreter(sandbox: Any) -> None:
    """Cells: streamed output, values, rich results, errors, per-cell variables, contexts."""
    streamed: list[str] = []
    first = sandbox.run_code("x = 41\nprint('hello')\nprint('world')", on_stdout=lambda m: streamed.append(m.line))
    assert first.error is None and first.logs.stdout == ["hello\n", "world\n"] and streamed == first.logs.stdout
    second = sandbox.run_code("x + 1")
    assert second.text == "42" and second.execution_count == 2
    assert sandbox.run_code("'quoted'").text == "quoted"
    table = sandbox.run_code("import pandas as pd\npd.DataFrame({'a': [1, 2]})")
    assert table.results[0].formats() == ["text", "html"] and "<table" in table.results[0].html
    figure = sandbox.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()")
    assert figure.results[0].formats() == ["text", "png"]
    assert base64.b64decode(figure.results[0].png).startswith(b"\x89PNG")
    failed = sandbox.run_code("1 / 0")
    assert failed.error is not None and failed.error.name == "ZeroDivisionError"
    assert "division by zero" in failed.error.value and "ZeroDivisionError" in failed.error.traceback
    once = sandbox.run_code("import os\nos.environ.get('ONCE')", envs={"ONCE": "set"})
    assert once.text == "set" and sandbox.run_code("os.environ.get('ONCE')").text is None
    sandbox.files.write("seen.txt", "7")
    assert sandbox.run_code("open('seen.txt').read()").text == "7"
    child = sandbox.run_code("import subprocess\nsubprocess.run(['echo', 'from a child'])\nNone")
    assert child.logs.stdout == ["from a child\n"]

    other = sandbox.create_code_context()
    assert sandbox.run_code("x", context=other).error.name == "NameError"
    assert {c.id for c in sandbox.list_code_contexts()} >= {other.id}
    sandbox.run_code("y = 1", context=other)
    sandbox.restart_code_context(other)
    assert sandbox.run_code("y", context=other).error.name == "NameError"
    sandbox.remove_code_context(other)
    assert other.id not in {c.id for c in sandbox.list_code_contexts()}
    assert sandbox.run_code("x").text == "41"


def check_commands(sandbox: Any, sdk: Any) -> None:
    """Foreground commands: output, environment, directory, exit codes, time limits. ``sdk``
    holds the exception classes (the SDK module, or the drop-in's)."""
    chunks: list[str] = []
    result = sandbox.commands.run(
        "echo one; echo two >&2; echo $GREETING; pwd", envs={"GREETING": "hi"}, on_stdout=chunks.append
    )
    assert result.exit_code == 0 and result.stdout == "one\nhi\n/home/user\n" and result.stderr == "two\n"
    assert "".join(chunks) == result.stdout
    assert sandbox.commands.run("pwd", cwd="/tmp").stdout == "/tmp\n"
    with pytest.raises(sdk.CommandExitException) as failed:
        sandbox.commands.run("echo partial; exit 3")
    assert failed.value.exit_code == 3 and failed.value.stdout == "partial\n"
    started = time.monotonic()
    with pytest.raises(sdk.TimeoutException):
        sandbox.commands.run("sleep 60", timeout=1)
    assert time.monotonic() - started < 30


def check_files(sandbox: Any) -> None:
    """Files: text and bytes, listing, directories, renames, removal, what commands see."""
    sandbox.files.write("/home/user/notes/a.txt", "text ✓")
    sandbox.files.write("relative.bin", b"\x00\xff" * 100_000)
    assert sandbox.files.read("/home/user/notes/a.txt") == "text ✓"
    assert bytes(sandbox.files.read("/home/user/relative.bin", format="bytes")) == b"\x00\xff" * 100_000
    names = {entry.name: entry for entry in sandbox.files.list("/home/user")}
    assert _kind(names["notes"]) == "dir" and _kind(names["relative.bin"]) == "file"
    assert names["relative.bin"].size == 200_000 and names["relative.bin"].owner == "user"
    assert sandbox.files.exists("/home/user/notes/a.txt") and not sandbox.files.exists("/home/user/nothing")
    assert sandbox.files.make_dir("/home/user/made/deep") is True
    assert sandbox.files.make_dir("/home/user/made/deep") is False
    sandbox.files.rename("/home/user/notes/a.txt", "/home/user/made/b.txt")
    assert sandbox.commands.run("cat made/b.txt").stdout == "text ✓"
    sandbox.files.remove("/home/user/made")
    assert not sandbox.files.exists("/home/user/made")
