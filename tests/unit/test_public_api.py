from __future__ import annotations

import ast
import inspect
import types
import typing
from pathlib import Path

from pydantic import BaseModel

import engine
from engine import Engine, Sandbox, SyncEngine, SyncSandbox, SyncWatcher, Watcher, lowlevel, testing


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
    public = [getattr(engine, name) for name in engine.__all__]
    errors = [error for error in public if isinstance(error, type) and issubclass(error, BaseException)]
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


def _engine_types(annotation: object) -> set[type]:
    if typing.get_origin(annotation) is not None:
        return {found for argument in typing.get_args(annotation) for found in _engine_types(argument)}
    if isinstance(annotation, type) and annotation.__module__.split(".")[0] == "engine":
        return {annotation}
    return set()


def test_every_type_a_public_signature_names_is_public() -> None:
    """What a caller is handed or must hand in is importable from a public module."""
    exported = {getattr(module, name) for module in (engine, lowlevel, testing) for name in module.__all__}
    names = {**vars(engine), **vars(lowlevel)}
    missing = set()
    for name in engine.__all__:
        public = getattr(engine, name)
        if not inspect.isclass(public):
            continue
        annotations = dict(public.model_fields) if issubclass(public, BaseModel) else {}
        hinted = [(field, info.annotation) for field, info in annotations.items()]
        for member_name, member in vars(public).items():
            function = member.fget if isinstance(member, property) else member
            if (member_name.startswith("_") and member_name != "__init__") or not inspect.isfunction(function):
                continue
            hints = typing.get_type_hints(function, localns=names)
            hinted += [(f"{member_name}:{argument}", hint) for argument, hint in hints.items()]
        missing |= {
            f"{name}.{where} names {found.__module__}.{found.__name__}"
            for where, hint in hinted
            for found in _engine_types(hint)
            if found not in exported
        }
    assert not missing, sorted(missing)
