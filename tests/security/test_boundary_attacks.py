"""The assert boundary carries what real tests pass (complex numbers, classes, the test's own
objects, the program's objects, the program's modules, the image's libraries) and nothing that
lets the program answer for the test: each kind of value with the attack on it, on every sandbox.
"""

from __future__ import annotations

import textwrap

from engine import AssertTest, Submission, SyncEngine, Verdict


def judged(engine: SyncEngine, code: str, *tests: str, prelude: str = "") -> list[Verdict]:
    submission = Submission(
        code=textwrap.dedent(code),
        tests=[AssertTest(code=textwrap.dedent(test), prelude=textwrap.dedent(prelude)) for test in tests],
    )
    result = engine.judge(submission)
    return [case.verdict for case in result.tests]


def test_complex_numbers_classes_and_imported_modules_cross(engine: SyncEngine) -> None:
    code = """
        import cmath, sys
        def phase(a, b):
            return cmath.phase(a + b)
        def drop(values, kind):
            return [v for v in values if not isinstance(v, kind)]
        def kinds(values):
            return [type(v) for v in values]
        def biggest(flag):
            return sys.maxsize if flag else 0
        def exact(values):
            from collections import deque
            from fractions import Fraction
            return deque(sorted(values)), sum(Fraction(1, v) for v in values)
    """
    verdicts = judged(
        engine,
        code,
        "assert abs(phase(0, 1j) - 1.5707963267948966) < 1e-9",
        "assert phase(0, -1j) < 0 and isinstance(phase(1, 1j), float)",
        "assert drop((4, 5, 4, 7.7, 1.2), int) == [7.7, 1.2]",
        "assert kinds([1, 'a', (1,)]) == [int, str, tuple]",
        # The program imported sys; the test uses it as MBPP's tests do.
        "assert biggest(True) == sys.maxsize",
        "from collections import deque\nfrom fractions import Fraction\n"
        "assert exact([3, 2]) == (deque([2, 3]), Fraction(5, 6))",
        # Wrong answers stay wrong.
        "assert drop((1, 2.5), float) == [2.5]",
        "assert kinds([1]) == [str]",
        "from fractions import Fraction\nassert exact([2])[1] == Fraction(1, 3)",
    )
    assert verdicts == [Verdict.PASSED] * 6 + [Verdict.WRONG_ANSWER] * 3


def test_the_tests_objects_cross_by_state_and_come_back_as_the_tests_class(engine: SyncEngine) -> None:
    setup = """
        class Node:
            def __init__(self, data):
                self.data = data
                self.left = None
                self.right = None
            def __eq__(self, other):
                mine, theirs = (self.data, self.left, self.right), (other.data, other.left, other.right)
                return isinstance(other, Node) and mine == theirs
        root = Node(1)
        root.left = Node(2)
        root.left.left = Node(4)
        root.right = Node(3)
    """
    # As MBPP's harness does: the setup code runs before the program too.
    code = (
        setup
        + """
        def height(node):
            return 0 if node is None else 1 + max(height(node.left), height(node.right))
        def mirror(node):
            if node is None:
                return None
            copy = Node(node.data)
            copy.left, copy.right = mirror(node.right), mirror(node.left)
            return copy
    """
    )
    verdicts = judged(
        engine,
        code,
        "assert height(root) == 3",
        "assert mirror(mirror(root)) == root and type(mirror(root)) is Node",
        "assert mirror(root) == root",
        prelude=setup,
    )
    assert verdicts == [Verdict.PASSED, Verdict.PASSED, Verdict.WRONG_ANSWER]


def test_the_programs_objects_stay_with_it_and_are_compared_by_state(engine: SyncEngine) -> None:
    code = """
        class Pair:
            def __init__(self, a, b):
                self.a, self.b = a, b
        def longest_chain(pairs, n):
            pairs = sorted(pairs, key=lambda p: p.b)
            count, end = 0, float("-inf")
            for p in pairs[:n]:
                if p.a > end:
                    count, end = count + 1, p.b
            return count
        class Stack:
            def __init__(self):
                self.items = []
            def push(self, item):
                self.items.append(item)
            def pop(self):
                return self.items.pop()
    """
    verdicts = judged(
        engine,
        code,
        "assert longest_chain([Pair(5, 24), Pair(15, 25), Pair(27, 40), Pair(50, 60)], 4) == 3",
        "assert Pair(1, 2) == Pair(1, 2) and Pair(1, 2) != Pair(2, 1) and Pair(1, 2).b == 2",
        "s = Stack(); s.push(1); s.push(2)\nassert s.pop() == 2 and s.items == [1]",
        "assert longest_chain([Pair(1, 2), Pair(3, 4)], 2) == 1",
    )
    assert verdicts == [Verdict.PASSED] * 3 + [Verdict.WRONG_ANSWER]


def test_trusted_code_imports_the_images_libraries(engine: SyncEngine) -> None:
    # HumanEval-X's prelude imports numpy before every Python problem.
    prelude = "import numpy\nimport numpy as np\nfrom typing import *\n"
    code = prelude + "def scale(values, k):\n    return [v * k for v in values]\n"
    verdicts = judged(
        engine,
        code,
        "assert np.allclose(scale([0.1, 0.2], 3), np.array([0.3, 0.6]))",
        "assert np.allclose(scale([1.0], 2), np.array([3.0]))",
        prelude=prelude,
    )
    assert verdicts == [Verdict.PASSED, Verdict.WRONG_ANSWER]


def test_objects_that_lie_never_pass(engine: SyncEngine) -> None:
    code = """
        import os
        class Liar:
            def __eq__(self, other):
                return True
            def __ne__(self, other):
                return False
            def __hash__(self):
                return hash(42)
            def __getattr__(self, name):
                return 42
            def __reduce__(self):
                return (os.system, ("echo reduced > /tmp/reduced",))
        class Sly(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__
        def liar():
            return Liar()
        def sly():
            return Sly(1)
        def inside():
            return [Liar(), {"k": Liar()}]
    """
    verdicts = judged(
        engine,
        code,
        "assert liar() == 42",
        "assert not (liar() != 42)",
        "assert liar() in {42}",
        "assert liar().value == 42",
        "assert sly() == 2",
        "assert inside() == [42, {'k': 42}]",
        "import pickle\nassert pickle.loads(pickle.dumps(liar())) == 42",
    )
    assert Verdict.PASSED not in verdicts, verdicts


def test_a_state_cannot_make_the_tests_object_another_class(engine: SyncEngine) -> None:
    """The state of a test's class comes back as data set on the test's class; were ``__class__``
    among it, the rebuilt object would become a class whose ``__eq__`` says yes to everything."""
    setup = """
        from unittest import mock
        class Node:
            def __init__(self, data):
                self.data = data
            def __eq__(self, other):
                return isinstance(other, Node) and self.data == other.data
    """
    code = (
        setup
        + """
        def forged(x):
            node = Node(x)
            node.__dict__["__class__"] = type(mock.ANY)
            node.__dict__["__dict__"] = {}
            return node
        def slotted(x):
            node = Node(x)
            node.__dict__["__eq__"] = lambda other: True
            return node
    """
    )
    verdicts = judged(engine, code, "assert forged(1) == Node(2)", "assert slotted(1) == Node(2)", prelude=setup)
    assert Verdict.PASSED not in verdicts, verdicts


def test_a_handle_is_only_a_name_for_the_programs_object(engine: SyncEngine) -> None:
    """What the test holds of the program's object runs nothing here: reading it reads the state
    that crossed, and calling its methods calls the program."""
    code = """
        class Box:
            def __init__(self):
                self.value = 1
            def peek(self):
                # The program's own process: none of the test's names are here.
                return not {"candidate", "b", "box_"} & set(globals()) and "box" in globals()
        def box():
            return Box()
    """
    verdicts = judged(
        engine,
        code,
        "b = box()\nassert b.value == 1 and b.peek() is True",
        "b = box()\nassert repr(b) == 'Box(value=1)' and hash(b) == hash(box())",
    )
    assert verdicts == [Verdict.PASSED] * 2
