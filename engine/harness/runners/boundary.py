"""The trusted side of the assert boundary: what the test code holds of the program (standard
library only).

Trusted test code runs here; the program runs in the worker. What crosses is data (``codec``):

- the program's functions and classes are :class:`RemoteFunction` s: calling one sends the
  arguments and waits for the value;
- an object of a class the test code (or its prelude) defines crosses by its state and is rebuilt
  on the other side from the class of the same name, so what comes back is this side's class with
  the program's data, judged by this side's ``__eq__``;
- an object of the program's own class stays with the program: here it is a
  :class:`ProgramObject`, a handle with the state the object had when it last crossed. It is
  compared by that state, never by the program's ``__eq__``; its methods are remote calls;
- a module the program imported is the same module imported here, from the image's libraries
  only (the program's directory is never on this side's path).
"""

from __future__ import annotations

import sys

from .. import codec
from .._typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, Protocol

    class Caller(Protocol):
        def remote_call(
            self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], target: ProgramObject | None = None
        ) -> Any: ...


# Modules whose import acts on its own (prints, opens a browser or a window): a program cannot
# make the trusted side import one by binding it to a name the test uses.
_ACTING_MODULES = frozenset({"this", "antigravity", "idlelib", "tkinter", "turtle", "turtledemo", "__main__"})


class RemoteFunction:
    """Stands for one of the program's functions (or classes) inside trusted test code."""

    def __init__(self, caller: Caller, name: str, target: ProgramObject | None = None) -> None:
        self._caller = caller
        self._name = name
        self._target = target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._caller.remote_call(self._name, args, kwargs, self._target)

    def __repr__(self) -> str:
        return f"<function {self._name}>"


class ProgramObject:
    """An object of the program's own class, held by the program; this side has its handle and
    the state it had when it last crossed (None if that state is not data)."""

    __slots__ = ("_caller", "_class_name", "_handle", "_state")

    def __init__(self, caller: Caller, handle: int, class_name: str, state: dict[str, Any] | None) -> None:
        self._caller = caller
        self._handle = handle
        self._class_name = class_name
        self._state = state

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProgramObject):
            return NotImplemented
        if self._handle == other._handle:
            return True
        return self._state is not None and (self._class_name, self._state) == (other._class_name, other._state)

    def __hash__(self) -> int:
        return hash(self._class_name)

    def __getattr__(self, name: str) -> Any:
        state = self._state
        if state is not None and name in state:
            return state[name]
        if name.startswith("__"):
            raise AttributeError(name)
        return RemoteFunction(self._caller, name, self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._caller.remote_call("__call__", args, kwargs, self)

    def __repr__(self) -> str:
        if self._state is None:
            return f"<{self._class_name} object>"
        fields = ", ".join(f"{key}={value!r}" for key, value in self._state.items())
        return f"{self._class_name}({fields})"


class TrustedObjects(codec.Objects):
    """How values cross from and to the test code (see the module doc)."""

    rebuilds_values = True

    def __init__(self, caller: Caller, namespace: dict[str, Any]) -> None:
        self._caller = caller
        self._namespace = namespace

    def _trusted_class(self, name: str) -> type | None:
        cls = self._namespace.get(name)
        return cls if isinstance(cls, type) and cls.__module__ == "__main__" else None

    def encode(self, value: Any, depth: int) -> Any:
        if isinstance(value, ProgramObject):
            return {"$handle": value._handle}
        cls = type(value)
        if self._trusted_class(cls.__qualname__) is cls:
            state = {key: item for key, item in _state_of(value).items()}
            return {"$object": [cls.__qualname__, None, codec.encode(state, self, depth)]}
        raise codec.CodecError(
            f"cannot pass a {cls.__qualname__} to the program: only plain values, the test's own classes"
            " and the program's objects cross"
        )

    def decode(self, tag: str, body: Any, depth: int) -> Any:
        if tag != "$object" or type(body) is not list or len(body) != 3:
            raise codec.CodecError(f"the program sent a malformed {tag}")
        name, handle, encoded_state = body
        if type(name) is not str or not (handle is None or type(handle) is int):
            raise codec.CodecError("the program sent a malformed $object")
        state = codec.decode(encoded_state, objects=self, _depth=depth)
        if state is not None and not (type(state) is dict and all(_is_attribute(key) for key in state)):
            # Never a special name: ``__class__`` set from data would make the object another
            # class, one whose ``__eq__`` says yes to everything.
            raise codec.CodecError("an object's state must map attribute names (not special ones) to values")
        cls = self._trusted_class(name)
        if cls is not None:
            # The test's own class, with the program's data only: no program code comes along.
            make: Any = cls.__new__
            rebuilt = make(cls)
            try:
                for key, item in (state or {}).items():
                    object.__setattr__(rebuilt, key, item)
            except (AttributeError, TypeError) as exc:
                raise codec.CodecError(f"the program's {name} cannot be rebuilt here: {exc}") from None
            return rebuilt
        if handle is None:
            raise codec.CodecError(f"the program sent a {name} that it does not hold")
        return ProgramObject(self._caller, handle, name, state)

    def refresh(self, target: ProgramObject, encoded: Any) -> None:
        """A method call may change its object: keep the state it has after the call."""
        refreshed = codec.decode(encoded, objects=self)
        if isinstance(refreshed, ProgramObject) and refreshed._handle == target._handle:
            target._state = refreshed._state


def _is_attribute(name: Any) -> bool:
    return type(name) is str and name.isidentifier() and not name.startswith("__")


def _state_of(value: Any) -> dict[str, Any]:
    try:
        state = dict(object.__getattribute__(value, "__dict__"))
    except AttributeError:
        state = {}
    for cls in type(value).__mro__:
        for slot in cls.__dict__.get("__slots__", ()):
            if slot not in ("__dict__", "__weakref__") and hasattr(value, slot):
                state[slot] = getattr(value, slot)
    return state


class ImageLibraries:
    """A finder of last resort that lets trusted code import the image's libraries (numpy,
    pandas, ...). The harness starts without them, so that nothing but the standard library runs
    before the program does; the first import the standard library cannot serve adds their
    directories (the image's, read-only, never the program's) to the path."""

    @classmethod
    def install(cls) -> None:
        if not any(isinstance(finder, cls) for finder in sys.meta_path):
            sys.meta_path.append(cls())

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        import site
        from importlib.machinery import PathFinder

        sys.meta_path.remove(self)
        for directory in site.getsitepackages():
            if directory not in sys.path:
                site.addsitedir(directory)
        return PathFinder.find_spec(name, path, target)


def program_modules(modules: dict[str, str], wanted: set[str]) -> dict[str, Any]:
    """The modules the program imported under the names the test code uses, each imported here."""
    found: dict[str, Any] = {}
    for name, module_name in modules.items():
        if name not in wanted or module_name.split(".")[0] in _ACTING_MODULES:
            continue
        try:
            __import__(module_name)  # importlib's import_module, without importing importlib at start
            found[name] = sys.modules[module_name]
        except Exception:  # noqa: BLE001, S112 - not in the image (the program's own module): the test cannot use it
            continue
    return found


def names_used(*codes: Any) -> set[str]:
    """Every global name that compiled code (and the code nested in it) refers to."""
    names: set[str] = set()
    pending = list(codes)
    while pending:
        code = pending.pop()
        names.update(code.co_names)
        pending.extend(const for const in code.co_consts if hasattr(const, "co_names"))
    return names
