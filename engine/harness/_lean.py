"""``signal``, ``socket`` and JSON from the standard library's C modules, without the Python
modules around them, and ``contextlib.suppress`` without contextlib (standard library only).

Those Python modules import ``enum`` and ``re`` (so do ``json`` and ``base64``): about 6 ms of
every container's start, before any test runs. The C modules are what the Python ones wrap,
under the same names; type checkers see the Python ones. What differs: ``signal.signal`` returns
plain integers, not ``Handlers``; sockets are ``_socket.socket`` (no ``makefile``, no ``with``).
``loads`` and ``dumps`` drive ``json``'s own C scanner and encoder exactly as ``json.loads``
and ``json.dumps`` do, for UTF-8 documents (the only kind our channels carry).
"""

from __future__ import annotations

import _json

from ._typing import TYPE_CHECKING

if TYPE_CHECKING:
    import signal
    import socket
    from collections.abc import Callable
    from typing import Any
else:
    import _signal as signal
    import _socket as socket

__all__ = ["dumps", "loads", "signal", "socket", "suppress"]

_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}
_JSON_WHITESPACE = " \t\n\r"


class _Scanning:
    """The settings ``json``'s C scanner reads from a ``JSONDecoder``, at ``json.loads``'s defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    array_hook = None  # read by newer Pythons' scanner
    parse_int = int

    def __init__(self, parse_float: Callable[[str], Any], parse_constant: Callable[[str], Any]) -> None:
        self.parse_float = parse_float
        self.parse_constant = parse_constant


def loads(
    document: bytes | str,
    *,
    parse_float: Callable[[str], Any] = float,
    parse_constant: Callable[[str], Any] = _CONSTANTS.__getitem__,
) -> Any:
    """``json.loads(document, parse_float=..., parse_constant=...)``.

    :raises ValueError: not one JSON document (``UnicodeDecodeError`` for bad UTF-8).
    :raises RecursionError: nested deeper than the interpreter's recursion limit.
    """
    text = document.decode("utf-8", "surrogatepass") if isinstance(document, bytes) else document
    text = text.strip(_JSON_WHITESPACE)
    try:
        # The scanner reads its settings from any object that has them (typeshed wants its own type).
        scan = _json.make_scanner(_Scanning(parse_float, parse_constant))  # type: ignore[arg-type]
        value, end = scan(text, 0)
    except StopIteration:
        raise ValueError("Expecting value: line 1 column 1 (char 0)") from None
    if end != len(text):
        raise ValueError(f"Extra data: char {end}")
    return value


def _unserializable(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(value: Any, *, sort_keys: bool = False, allow_nan: bool = False) -> str:
    """``json.dumps(value, separators=(",", ":"), sort_keys=..., allow_nan=...)``: ASCII only,
    circular references refused (``ValueError``), as are NaN and infinities unless ``allow_nan``."""
    encode = _json.make_encoder(
        {}, _unserializable, _json.encode_basestring_ascii, None, ":", ",", sort_keys, False, allow_nan
    )
    return "".join(encode(value, 0))


class suppress:  # named as the contextlib class it stands for
    """``contextlib.suppress`` for plain exceptions: contextlib imports collections and functools,
    about 4 ms of every container's start."""

    def __init__(self, *exceptions: type[BaseException]) -> None:
        self._exceptions = exceptions

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, traceback: object) -> bool:
        return kind is not None and issubclass(kind, self._exceptions)
