"""The trusted side of the assert boundary, on its own: what it makes of what the program sends."""

from __future__ import annotations

from typing import Any

import pytest

from engine.harness import codec
from engine.harness.runners.boundary import ProgramObject, TrustedObjects


class Node:
    def __init__(self, data: Any) -> None:
        self.data = data


Node.__module__ = "__main__"  # as a class the test code defines


class NoCalls:
    def remote_call(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("nothing here may call the program")


def trusted() -> TrustedObjects:
    return TrustedObjects(NoCalls(), {"Node": Node})


def test_the_tests_class_comes_back_as_itself_with_the_programs_data() -> None:
    node = codec.decode({"$object": ["Node", 3, {"$dict": [["data", 7]]}]}, objects=trusted())
    assert type(node) is Node and node.data == 7


def test_the_programs_objects_are_handles_compared_by_state() -> None:
    objects = trusted()
    one, same, other = (
        codec.decode({"$object": ["Pair", handle, {"$dict": [["a", a]]}]}, objects=objects)
        for handle, a in ((0, 1), (1, 1), (2, 2))
    )
    assert isinstance(one, ProgramObject) and one == same and one != other and one.a == 1
    assert codec.encode(one, objects) == {"$handle": 0}
    stateless = codec.decode({"$object": ["Gen", 4, None]}, objects=objects)
    assert stateless != codec.decode({"$object": ["Gen", 5, None]}, objects=objects)


@pytest.mark.parametrize(
    "sent",
    [
        {"$handle": 0},
        {"$object": ["Node", None, {"$dict": [["__class__", {"$class": "builtins:object"}]]}]},
        {"$object": ["Node", None, {"$dict": [["__dict__", {"$dict": []}]]}]},
        {"$object": ["Node", None, {"$dict": [[1, 2]]}]},
        {"$object": ["Node", None, [1]]},
        {"$object": ["Pair", None, None]},
        {"$object": ["Pair", "0", None]},
        {"$object": [None, 0, None]},
        {"$object": ["Pair", 0]},
    ],
)
def test_what_the_program_cannot_send(sent: Any) -> None:
    with pytest.raises(codec.CodecError):
        codec.decode(sent, objects=trusted())


def test_only_the_tests_classes_and_handles_go_to_the_program() -> None:
    class Elsewhere:
        pass

    assert codec.encode(Node(2), trusted()) == {"$object": ["Node", None, {"$dict": [["data", 2]]}]}
    with pytest.raises(codec.CodecError, match="Elsewhere"):
        codec.encode(Elsewhere(), trusted())
