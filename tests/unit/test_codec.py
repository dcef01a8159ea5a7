from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.harness import codec

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
    | st.complex_numbers(allow_nan=False)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.integers() | st.text(max_size=3), inner, max_size=4)
        | st.frozensets(st.integers(), max_size=4)
    ),
    max_leaves=20,
)


@given(values)
def test_round_trip_keeps_types(value: object) -> None:
    wire = json.loads(json.dumps(codec.encode(value)))
    assert _typed(codec.decode(wire)) == _typed(value)


def _typed(value: object) -> object:
    """A comparable shape that also distinguishes types (tuple vs list, int vs bool vs float)."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_typed(v) for v in value])
    if isinstance(value, dict):
        return ("dict", sorted((repr(_typed(k)), _typed(v)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return (type(value).__name__, sorted(repr(_typed(v)) for v in value))
    return (type(value).__name__, value)


def test_special_floats() -> None:
    encoded = codec.encode([math.inf, -math.inf, math.nan])
    json.dumps(encoded, allow_nan=False)  # strict JSON
    inf, minus_inf, nan = codec.decode(encoded)
    assert inf == math.inf and minus_inf == -math.inf and math.isnan(nan)


def test_objects_with_behaviour_are_not_encodable() -> None:
    class AlwaysEqual:
        def __eq__(self, other: object) -> bool:
            return True

    with pytest.raises(codec.CodecError, match="AlwaysEqual"):
        codec.encode(AlwaysEqual())


def test_subclasses_keep_their_type_name() -> None:
    class Score(float):
        pass

    encoded = codec.encode(Score(1.5))
    assert codec.decode(encoded) == 1.5
    kept = codec.decode(encoded, keep_types=True)
    assert isinstance(kept, codec.Typed) and kept.type_name.endswith("Score") and kept.value == 1.5


@pytest.mark.parametrize(
    "malformed",
    [
        {"$tuple": 3},
        {"$dict": [[1]]},
        {"$dict": [[[1], 2]]},
        {"$set": [[1, 2]]},
        {"$float": "1e999"},
        {"$bytes": "!!"},
        {"$evil": []},
        {"a": 1, "b": 2, "c": 3},
        {"$type": 5, "value": 1},
        {"$complex": [1.0]},
        {"$complex": ["1", 2.0]},
        {"$complex": [{"$float": "e"}, 0.0]},
        {"$class": "int"},
        {"$class": 5},
        {"$object": ["X", None, {}]},
        {"$handle": 0},
    ],
)
def test_malformed_documents_are_rejected(malformed: object) -> None:
    with pytest.raises(codec.CodecError):
        codec.decode(malformed)


def test_nesting_is_bounded() -> None:
    deep: object = []
    for _ in range(codec.MAX_DEPTH + 10):
        deep = [deep]
    with pytest.raises(codec.CodecError, match="deeply"):
        codec.encode(deep)


@pytest.mark.parametrize(
    "value", [10**5000, -(10**5000), 2**4096, 2**4097 + 1], ids=["big", "negative", "edge", "past-edge"]
)
def test_integers_of_any_size_travel_and_come_back_exact(value: int) -> None:
    wire = json.loads(json.dumps(codec.encode(value)))  # no digit limit on the way
    assert codec.decode(wire) == value


def test_small_integers_stay_plain_json() -> None:
    assert codec.encode(2**4096 - 1) == 2**4096 - 1
    assert codec.encode(2**4096) == {"$int": hex(2**4096)}


@pytest.mark.parametrize("malformed", [{"$int": "12"}, {"$int": 12}, {"$int": "0xzz"}, math.inf, -math.nan])
def test_malformed_numbers_are_rejected(malformed: object) -> None:
    with pytest.raises(codec.CodecError):
        codec.decode(malformed)


def test_complex_numbers_travel_with_special_parts() -> None:
    values = [1j, complex(0.5, -2), complex(math.inf, 1), complex(1, -math.inf)]
    wire = json.loads(json.dumps(codec.encode(values), allow_nan=False))
    assert codec.decode(wire) == values and all(type(v) is complex for v in codec.decode(wire))


def test_classes_cross_by_name_and_are_never_imported_to_be_decoded() -> None:
    import collections

    assert codec.decode(codec.encode([int, str, collections.OrderedDict])) == [int, str, collections.OrderedDict]
    # A module the decoding side has not imported stays a name: decoding runs no import.
    reference = codec.decode({"$class": "airlock_nowhere.module:Thing"})
    assert isinstance(reference, codec.ClassRef) and reference == codec.ClassRef("airlock_nowhere.module:Thing")
    assert not reference.__eq__(int) and codec.decode({"$class": "builtins:int"}) is int
    # A name that resolves to something that is not that class is only a name.
    assert isinstance(codec.decode({"$class": "builtins:len"}), codec.ClassRef)
    assert isinstance(codec.decode({"$class": "os:system"}), codec.ClassRef)


def test_objects_cross_only_through_the_side_that_knows_them() -> None:
    class Point:
        def __init__(self, x: int) -> None:
            self.x = x

    class ByState(codec.Objects):
        def encode(self, value: object, depth: int) -> object:
            return {"$object": ["Point", None, codec.encode(vars(value), self, depth)]}

        def decode(self, tag: str, body: object, depth: int) -> object:
            assert isinstance(body, list)
            return Point(**codec.decode(body[2], objects=self))

    with pytest.raises(codec.CodecError, match="Point"):
        codec.encode(Point(1))
    wire = codec.encode([Point(2)], ByState())
    with pytest.raises(codec.CodecError, match="unknown tag"):
        codec.decode(wire)
    (point,) = codec.decode(wire, objects=ByState())
    assert isinstance(point, Point) and point.x == 2


def test_standard_library_values_are_rebuilt_where_a_side_rebuilds_them() -> None:
    import collections
    import datetime
    import decimal
    import fractions

    class Rebuilding(codec.Objects):
        rebuilds_values = True

    values = [
        collections.deque([1, 2]),
        fractions.Fraction(3, 4),
        decimal.Decimal("1.10"),
        datetime.date(2026, 11, 27),
        datetime.datetime(2026, 11, 27, 12, 0, tzinfo=datetime.UTC),
        datetime.time(12, 30),
        datetime.timedelta(days=1, seconds=2, microseconds=3),
    ]
    wire = json.loads(json.dumps(codec.encode(values, Rebuilding())))
    rebuilt = codec.decode(wire, objects=Rebuilding())
    assert rebuilt == values and [type(v) for v in rebuilt] == [type(v) for v in values]
    assert str(rebuilt[2]) == "1.10"
    # Elsewhere (the host judging call tests) they are not values.
    with pytest.raises(codec.CodecError):
        codec.encode(collections.deque([1]))
    for malformed in (["fractions:Fraction", [1, 0]], ["decimal:Decimal", "x"], ["os:system", "ls"]):
        with pytest.raises(codec.CodecError):
            codec.decode({"$value": malformed}, objects=Rebuilding())
