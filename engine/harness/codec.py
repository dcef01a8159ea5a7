"""Typed JSON for values that cross a process boundary (standard library only).

Plain JSON loses distinctions that judging needs: tuple vs list, int dict keys, NaN, sets,
bytes, and "a numpy float that merely looks like a float". ``encode`` keeps them with small
tagged objects; ``decode`` rebuilds builtin values only, so nothing a submission returns can
carry behaviour (no custom ``__eq__``, no pickle) to the side that compares.

    None, bool, str, finite float, list  ->  themselves
    int                 ->  itself, or {"$int": "<hex>"} beyond ``JSON_INT_BITS`` (JSON readers,
                            Python's among them, refuse or mangle integers of thousands of digits)
    float nan/inf       ->  {"$float": "nan" | "inf" | "-inf"}
    tuple               ->  {"$tuple": [...]}
    dict                ->  {"$dict": [[key, value], ...]}
    set / frozenset     ->  {"$set": [...]} / {"$frozenset": [...]}
    bytes               ->  {"$bytes": "<base64>"}
    complex             ->  {"$complex": [real, imag]}  (each part as a float above)
    a class             ->  {"$class": "module:QualName"}; rebuilt from a module the decoding side
                            has already imported (or the builtins), else as a :class:`ClassRef`
    anything else we can convert (numpy scalars and arrays, subclasses of builtins)
                        ->  {"$type": "module.QualName", "value": <plain encoding>, "base": "float"}
                            ("base" names the builtin the type subclasses, when it does)

Values of the standard library's value types (``collections.deque``, ``fractions.Fraction``,
``decimal.Decimal``, ``datetime``'s) cross as ``{"$value": ["module:Name", <plain>]}`` where
both sides rebuild them (:attr:`Objects.rebuilds_values`, the assert boundary): from data, by
the type's own constructor, never by anything the value carries.

Objects that are none of these cross only where a side passes :class:`Objects` that knows them
(the assert boundary: instances of the test's classes by their state, the program's by handle);
the tags for them are ``$object`` and ``$handle``, and their meaning is that side's.
"""

from __future__ import annotations

import binascii
import math

from ._lean import dumps
from ._typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

# Deeper values cannot be judged: each level costs the decoders a few interpreter frames, and
# the report that carries a value adds levels of its own.
MAX_DEPTH = 100
# Integers up to this size travel as JSON numbers; larger ones in hex, which every Python
# converts in linear time and without the decimal digit limit.
JSON_INT_BITS = 4096


class CodecError(ValueError):
    """A value cannot be encoded, or an encoded document is malformed."""


_BASES = (bool, int, float, str, bytes, tuple, list, dict, frozenset, set)


class Typed:
    """A decoded value whose original type was not a builtin (for example ``numpy.float64``).

    ``base`` is the builtin type the original subclassed (``"float"`` for ``numpy.float64``),
    or None (``numpy.int64`` subclasses nothing).
    """

    __slots__ = ("base", "type_name", "value")

    def __init__(self, type_name: str, value: Any, base: str | None = None) -> None:
        self.type_name = type_name
        self.value = value
        self.base = base

    def __repr__(self) -> str:
        return f"Typed({self.type_name!r}, {self.value!r}, base={self.base!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Typed) and (self.type_name, self.value, self.base) == (
            other.type_name,
            other.value,
            other.base,
        )

    def __hash__(self) -> int:
        return hash((self.type_name, _freeze(self.value)))


class ClassRef:
    """A class the decoding side has not imported, by its qualified name: equal to that class
    and to other references to it, and to nothing else."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<class {self.name.replace(':', '.')!r}>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, type):
            return class_name(other) == self.name
        return isinstance(other, ClassRef) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


def class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def imported_class(name: str, modules: dict[str, Any]) -> Any:
    """The class ``module:QualName`` from ``modules`` (a module already imported), or a
    :class:`ClassRef`; never imports, so a value cannot make the decoding side run code."""
    module_name, _, qualname = name.partition(":")
    target: Any = modules.get(module_name)
    for part in qualname.split(".") if target is not None else ():
        target = target.__dict__.get(part) if hasattr(target, "__dict__") else None
    return target if isinstance(target, type) and class_name(target) == name else ClassRef(name)


class Objects:
    """What one side of the boundary does with values that are not plain data. This base
    refuses them; the assert boundary's two sides say how theirs cross (see the module doc)."""

    rebuilds_values = False

    def encode(self, value: Any, depth: int) -> Any:
        raise CodecError(f"cannot encode a value of type {_type_name(value)}")

    def decode(self, tag: str, body: Any, depth: int) -> Any:
        raise CodecError(f"unknown tag {tag!r}")

    def resolve_class(self, name: str) -> Any:
        import sys

        return imported_class(name, sys.modules)


PLAIN = Objects()


def _date_like(name: str) -> tuple[Any, Any]:
    return (lambda value: value.isoformat()), (lambda plain: getattr(_module("datetime"), name).fromisoformat(plain))


def _module(name: str) -> Any:
    import importlib

    return importlib.import_module(name)


# The standard library's value types: how each becomes plain data, and is built again from it.
_VALUE_TYPES: dict[str, tuple[Any, Any]] = {
    "collections:deque": (list, lambda plain: _module("collections").deque(plain)),
    "fractions:Fraction": (
        lambda value: [value.numerator, value.denominator],
        lambda plain: _module("fractions").Fraction(*plain),
    ),
    "decimal:Decimal": (str, lambda plain: _module("decimal").Decimal(plain)),
    "datetime:date": _date_like("date"),
    "datetime:datetime": _date_like("datetime"),
    "datetime:time": _date_like("time"),
    "datetime:timedelta": (
        lambda value: [value.days, value.seconds, value.microseconds],
        lambda plain: _module("datetime").timedelta(*plain),
    ),
}


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((repr(k), _freeze(v)) for k, v in value.items()))
    return value


def _type_name(value: Any) -> str:
    cls = type(value)
    return f"{cls.__module__}.{cls.__qualname__}"


def _encode_float(value: float) -> Any:
    if math.isfinite(value):
        return value
    return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}


_NOTHING = object()


def _plain(value: Any) -> Any:
    """The builtin value a numpy value or an instance of a builtin's subclass stands for (by
    value, so no method of the original speaks for it), else ``_NOTHING``."""
    tolist = getattr(type(value), "tolist", None)
    if callable(tolist) and type(value).__module__.split(".")[0] == "numpy":
        return tolist(value)
    for base in _BASES:
        if isinstance(value, base):
            convert: Any = base  # the constructor of the builtin that value subclasses
            return convert(value)
    return _NOTHING


def encode(value: Any, objects: Objects = PLAIN, _depth: int = 0) -> Any:
    """Encode ``value`` as JSON-compatible data, or raise :class:`CodecError`."""
    if _depth > MAX_DEPTH:
        raise CodecError("value is nested too deeply")
    depth = _depth + 1
    cls = type(value)
    if value is None or cls is bool or cls is str:
        return value
    if cls is int:
        return value if value.bit_length() <= JSON_INT_BITS else {"$int": hex(value)}
    if cls is float:
        return _encode_float(value)
    if cls is list:
        return [encode(v, objects, depth) for v in value]
    if cls is tuple:
        return {"$tuple": [encode(v, objects, depth) for v in value]}
    if cls is dict:
        return {"$dict": [[encode(k, objects, depth), encode(v, objects, depth)] for k, v in value.items()]}
    if cls is set or cls is frozenset:
        items = sorted((encode(v, objects, depth) for v in value), key=lambda e: dumps(e, sort_keys=True))
        return {"$set" if cls is set else "$frozenset": items}
    if cls is bytes:
        return {"$bytes": binascii.b2a_base64(value, newline=False).decode("ascii")}
    if cls is complex:
        return {"$complex": [_encode_float(value.real), _encode_float(value.imag)]}
    if isinstance(value, type):
        return {"$class": class_name(value)}
    if objects.rebuilds_values and class_name(cls) in _VALUE_TYPES:
        to_plain, _ = _VALUE_TYPES[class_name(cls)]
        return {"$value": [class_name(cls), encode(to_plain(value), objects, depth)]}
    plain = _plain(value)
    if plain is _NOTHING:
        return objects.encode(value, depth)
    typed = {"$type": _type_name(value), "value": encode(plain, objects, depth)}
    base = next((b.__name__ for b in _BASES if isinstance(value, b)), None)
    if base is not None:
        typed["base"] = base
    return typed


def _decode_float(tag: Any) -> float:
    if tag not in ("nan", "inf", "-inf"):
        raise CodecError(f"bad $float tag {tag!r}")
    return float(tag)


def _decode_part(part: Any) -> float:
    if type(part) is float and math.isfinite(part):
        return part
    if type(part) is int and abs(part) <= 1 << 53:
        return float(part)
    if type(part) is dict and len(part) == 1 and "$float" in part:
        return _decode_float(part["$float"])
    raise CodecError("a part of a complex number must be a float")


def _decode_int(tag: Any) -> int:
    if type(tag) is not str or not tag.lstrip("-").startswith("0x"):
        raise CodecError("bad $int tag")
    return int(tag, 16)


def decode(data: Any, *, keep_types: bool = False, objects: Objects = PLAIN, _depth: int = 0) -> Any:
    """Rebuild a value from :func:`encode`'s output.

    With ``keep_types`` a ``$type`` entry becomes a :class:`Typed`; without it, the plain
    value it carries. Raises :class:`CodecError` for anything ``encode`` cannot produce.
    """
    if _depth > MAX_DEPTH:
        raise CodecError("value is nested too deeply")
    depth = _depth + 1
    cls = type(data)
    if data is None or cls in (bool, int, str):
        return data
    if cls is float:
        if not math.isfinite(data):
            raise CodecError("a non-finite float must travel as a $float tag")
        return data
    if cls is list:
        return [decode(v, keep_types=keep_types, objects=objects, _depth=depth) for v in data]
    if cls is not dict or not data:
        raise CodecError(f"unexpected {cls.__name__} in an encoded value")
    try:
        if "$type" in data:
            base = data.get("base")
            if not set(data) <= {"$type", "value", "base"} or type(data["$type"]) is not str or "value" not in data:
                raise CodecError("malformed $type entry")
            if base is not None and base not in {b.__name__ for b in _BASES}:
                raise CodecError(f"unknown base type {base!r}")
            inner = decode(data["value"], keep_types=keep_types, objects=objects, _depth=depth)
            return Typed(data["$type"], inner, base) if keep_types else inner
        if len(data) != 1:
            raise CodecError("an encoded tag has exactly one key")
        ((tag, body),) = data.items()
        if tag == "$float":
            return _decode_float(body)
        if tag == "$int":
            return _decode_int(body)
        if tag == "$bytes":
            return binascii.a2b_base64(body, strict_mode=True)
        if tag == "$class":
            if type(body) is not str or body.count(":") != 1:
                raise CodecError("$class needs 'module:QualName'")
            return objects.resolve_class(body)
        if tag in ("$object", "$handle"):
            return objects.decode(tag, body, depth)
        if tag == "$value" and objects.rebuilds_values:
            if type(body) is not list or len(body) != 2 or body[0] not in _VALUE_TYPES:
                raise CodecError("$value needs [a known value type, its plain value]")
            _, from_plain = _VALUE_TYPES[body[0]]
            plain = decode(body[1], objects=objects, _depth=depth)
            try:
                return from_plain(plain)
            except (ArithmeticError, TypeError, ValueError) as exc:
                raise CodecError(f"not a {body[0]}: {exc}") from None
        if tag == "$complex":
            if type(body) is not list or len(body) != 2:
                raise CodecError("$complex needs [real, imag]")
            real, imag = (_decode_part(part) for part in body)
            return complex(real, imag)
        if type(body) is not list:
            raise CodecError(f"{tag} needs a list")
        items = [decode(v, keep_types=keep_types, objects=objects, _depth=depth) for v in body]
        if tag == "$tuple":
            return tuple(items)
        if tag == "$set":
            return set(items)
        if tag == "$frozenset":
            return frozenset(items)
        if tag == "$dict":
            if not all(type(pair) is list and len(pair) == 2 for pair in items):
                raise CodecError("$dict needs [key, value] pairs")
            return {k: v for k, v in items}
    except (TypeError, ValueError) as exc:
        if isinstance(exc, CodecError):
            raise
        raise CodecError(f"malformed encoded value: {exc}") from exc
    raise CodecError(f"unknown tag {tag!r}")
