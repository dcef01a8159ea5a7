"""Tests choose optional sandboxes only through `tests/sandboxes.py`, which skips, with the
reason, where a machine lacks one.

A test that names gVisor, crun or the OCI runtime itself fails on a machine without it instead
of skipping (a test parametrized by hand on ``["runc", "gvisor"]`` once made the README's own
test command red there). Reading what was chosen (``tier == "gvisor"``) or keying expectations
by it (``{"gvisor": ...}``) is fine; choosing is not. Unit tests of pure logic start no
container and are exempt. runc is no option: Docker always has it.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
OPTIONAL = {"gvisor", "runsc", "crun", "oci"}
SELECTION = TESTS / "sandboxes.py"


def choices_made(source: str) -> list[int]:
    """Lines where an optional sandbox is named other than to compare with it or key by it."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    lines = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and node.value in OPTIONAL):
            continue
        parent = parents.get(node)
        while isinstance(parent, ast.Tuple | ast.List | ast.Set):
            parent = parents.get(parent)
        reads = isinstance(parent, ast.Compare) or (isinstance(parent, ast.Dict) and node in parent.keys)
        if not reads:
            lines.append(node.lineno)
    return sorted(lines)


def test_no_test_chooses_an_optional_sandbox_by_itself() -> None:
    found = {
        f"{path.relative_to(TESTS)}:{line}"
        for path in TESTS.rglob("*.py")
        if path != SELECTION and "unit" not in path.relative_to(TESTS).parts
        for line in choices_made(path.read_text())
    }
    assert not found, f"choose these through tests/sandboxes.py (it skips where one is missing): {sorted(found)}"


def test_the_guard_catches_the_test_that_once_failed_without_gvisor() -> None:
    old = """
@pytest.mark.parametrize("isolation", ["runc", "gvisor"])
async def test_a_watcher(isolation):
    async with Engine(Settings(pool_size=0, isolation=isolation)) as engine:
        if isolation == "runc":
            pass
"""
    assert choices_made(old) == [2]
    assert choices_made('Settings(runtime="oci")\nServer("runc", "--oci-runtime", "crun")') == [1, 2]
    assert choices_made('assert x or tier == "gvisor"\nREFUSED = {"gvisor": 1}\nok = name in ("crun", "runc")') == []
