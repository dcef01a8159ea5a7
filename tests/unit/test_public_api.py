from __future__ import annotations

import ast
import inspect
import types
from pathlib import Path

import engine
from engine import Engine, Sandbox, SyncEngine, SyncSandbox, SyncWatcher, Watcher


def test_all_is_complete() -> None:
    public = {
        name
        for name in dir(engine)
        if not name.startswith("_") and not isinstance(getattr(engine, name), types.ModuleType)  # subpackages
    }
    assert len(engine.__all__) == len(set(engine.__all__))  # ruff (RUF022) keeps the order
    assert set(engine.__all__) - {"__version__"} == public


def test_sync_facade_mirrors_every_public_engine_operation() -> None:
    for facade, core in ((SyncEngine, Engine), (SyncSandbox, Sandbox), (SyncWatcher, Watcher)):
        for name, member in inspect.getmembers(core):
            if name.startswith("_"):
                continue
            assert hasattr(facade, name), f"{facade.__name__} lacks {name}"
            if callable(member):
                core_params = list(inspect.signature(member).parameters)
                facade_params = list(inspect.signature(getattr(facade, name)).parameters)
                assert core_params == facade_params, name


def test_every_operational_error_shares_the_root() -> None:
    errors = [getattr(engine, name) for name in engine.__all__ if name.endswith(("Error", "NotFound", "Unavailable"))]
    assert errors and all(issubclass(error, engine.EngineError) for error in errors)


def test_the_in_image_harness_uses_the_standard_library_only() -> None:
    harness = Path(engine.__file__).parent / "harness"
    for path in harness.rglob("*.py"):
        package = path.parent.relative_to(harness).parts
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                # A relative import must land inside the harness package, on a module it has.
                assert node.level - 1 <= len(package), (path.name, node.module)
                base = harness.joinpath(*package[: len(package) - node.level + 1])
                target = base.joinpath(*node.module.split(".")) if node.module else base
                assert target.with_suffix(".py").exists() or (target / "__init__.py").exists(), (path, node.module)
            elif isinstance(node, ast.ImportFrom):
                assert node.module is not None and node.module.split(".")[0] in _stdlib(), (path.name, node.module)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] in _stdlib(), (path.name, alias.name)


def _stdlib() -> frozenset[str]:
    import sys

    return frozenset(sys.stdlib_module_names) | {"__future__"}
