"""The package's plan holds: folders by concern, a small root, and no import cycles (an import
made when a module loads, or inside a function, counts; one only for the type checker does not)."""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine"
# The root keeps the public models and facades, the core, and the edges (CLI, Ray, lowlevel).
MAX_ROOT_MODULES = 15


def _module(path: Path) -> str:
    parts = list(path.relative_to(ENGINE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path) -> set[str]:
    """What ``path`` imports from the engine when it runs (``if TYPE_CHECKING:`` blocks left out)."""
    tree = ast.parse(path.read_text())
    package = _module(path).split(".") if path.name == "__init__.py" else _module(path).split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            node.body = []
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                imported.add(candidate if _exists(candidate) else target)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    return {name for name in imported if name.split(".")[0] == "engine" and _exists(name)}


def _exists(module: str) -> bool:
    path = ENGINE.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _graph() -> dict[str, set[str]]:
    modules = [p for p in ENGINE.rglob("*.py") if "harness" not in p.relative_to(ENGINE).parts]
    graph = {_module(p): _runtime_imports(p) for p in modules}
    # A package's __init__ runs before any of its modules: importing one imports the package.
    for name, targets in graph.items():
        for target in list(targets):
            parts = target.split(".")
            targets.update(".".join(parts[:i]) for i in range(2, len(parts)) if ".".join(parts[:i]) != name)
    return graph


def test_no_module_imports_itself_through_others() -> None:
    graph = _graph()
    cycles = []
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1 and not module.startswith(target + "."):
                cycles.append([*trail[trail.index(target) :], target] if target in trail else [module, target])
            elif target not in state:
                visit(target, [*trail, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, cycles


def test_the_root_holds_only_the_models_the_core_and_the_edges() -> None:
    root = sorted(p.name for p in ENGINE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(root) <= MAX_ROOT_MODULES, root
    folders = sorted(p.name for p in ENGINE.iterdir() if (p / "__init__.py").exists())
    assert folders == ["compat", "e2b", "harness", "judge", "runtime", "sandboxes", "serve"]


def test_the_drop_ins_use_only_public_names() -> None:
    public = {"engine", "engine.lowlevel", "engine.testing", "engine.distributed", "engine.e2b"}
    private = {
        f"{_module(path)} imports {target}"
        for path in (ENGINE / "compat").rglob("*.py")
        for target in _runtime_imports(path)
        if target not in public and not target.startswith("engine.compat")
    }
    assert not private, sorted(private)
