"""The server-free drop-ins: E2B's code-interpreter Sandbox (today's API and the older
CodeInterpreter one) and AgentFly's code reward, backed directly by the engine."""

from __future__ import annotations

import base64
import gc
from collections.abc import Iterator

import pytest
from e2b_kit import check_code_interpreter, check_commands, check_files

from engine import SyncEngine
from engine.compat import agentfly, e2b_code_interpreter
from engine.compat.e2b_code_interpreter import CodeInterpreter, CommandExitException, FilesystemEventType, Sandbox

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def shared_engine(engine: SyncEngine) -> Iterator[None]:
    e2b_code_interpreter.configure(engine)
    agentfly.configure(engine)
    yield
    e2b_code_interpreter.configure(None)
    agentfly.configure(None)


def test_todays_sandbox_api(engine: SyncEngine) -> None:
    with Sandbox.create() as sandbox:
        printed: list[str] = []
        first = sandbox.run_code("x = 20\nprint('hello')", on_stdout=lambda message: printed.append(message.line))
        assert first.logs.stdout == ["hello\n"] and printed == ["hello\n"] and first.error is None
        assert sandbox.run_code("x * 2 + 2").text == "42"
        figure = sandbox.run_code("import matplotlib.pyplot as plt\nplt.bar([1, 2], [3, 4])\nplt.show()")
        assert figure.results[0].formats() == ["text", "png"]
        assert base64.b64decode(figure.results[0].png or "").startswith(b"\x89PNG")
        broken = sandbox.run_code("undefined_name")
        assert broken.error is not None and broken.error.name == "NameError"
        context = sandbox.create_code_context()
        assert sandbox.run_code("x", context=context).error is not None
        assert context.id in {c.id for c in sandbox.list_code_contexts()}
        sandbox.remove_code_context(context)

        assert sandbox.files.make_dir("data")
        watch = sandbox.files.watch_dir("data")
        sandbox.files.write("data/n.txt", "7")
        assert sandbox.files.read("/home/user/data/n.txt") == "7"
        assert [entry.name for entry in sandbox.files.list("data")] == ["n.txt"]
        assert sandbox.files.exists("data/n.txt") and not sandbox.files.exists("data/m.txt")
        assert sandbox.run_code("open('data/n.txt').read()").text == "7"
        assert sandbox.commands.run("cat data/n.txt").stdout == "7"
        with pytest.raises(CommandExitException) as failed:
            sandbox.commands.run("echo no >&2; exit 4")
        assert failed.value.exit_code == 4 and failed.value.stderr == "no\n"
        events = watch.get_new_events()
        assert (events[0].name, events[0].type) == ("n.txt", FilesystemEventType.CREATE)
        watch.stop()
        sandbox_id = sandbox.sandbox_id
    assert sandbox_id not in {s.id for s in engine.sandboxes.list()}


def test_the_drop_in_passes_the_e2b_kit() -> None:
    """The checks the unmodified SDK passes through airlock serve (tests/integration/test_e2b.py)."""
    with Sandbox.create() as sandbox:
        check_code_interpreter(sandbox)
        check_commands(sandbox, e2b_code_interpreter)
        check_files(sandbox)


def test_the_older_code_interpreter_api() -> None:
    with CodeInterpreter() as sandbox:
        sandbox.notebook.exec_cell("def add(a, b):\n    return a + b")
        execution = sandbox.notebook.exec_cell("add(2, 3)")
        assert [result.text for result in execution.results] == ["5"]


@pytest.mark.anyio
async def test_agentfly_code_reward_keeps_a_rollouts_state(engine: SyncEngine) -> None:
    class Rollout:
        """Stands in for AgentFly's Context: the reward only needs an object per rollout."""

    rollout, other = Rollout(), Rollout()
    assert await agentfly.code_reward_test("print('Hello, World!')", rollout) == {
        "reward": 1.0,
        "output": "Hello, World!",
    }
    assert await agentfly.code_reward_test("print(undefined_variable)", rollout) == {
        "reward": 0.0,
        "output": "NameError: name 'undefined_variable' is not defined",
    }
    await agentfly.code_reward_test("kept = 5", rollout)
    assert (await agentfly.code_reward_test("print(kept)", rollout))["output"] == "5"
    assert (await agentfly.code_reward_test("print(kept)", other))["reward"] == 0.0
    before = len(engine.sandboxes.list())
    del rollout
    gc.collect()
    assert len(engine.sandboxes.list()) == before - 1
    agentfly.release(other)
    assert len(engine.sandboxes.list()) == before - 2
