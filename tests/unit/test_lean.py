"""The harness's JSON from json's C scanner and encoder reads and writes exactly what ``json``
does, refuses what it refuses, and the harness starts without ``enum`` and ``re``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.harness._lean import dumps, loads

DOCUMENTS = [
    '{"op":"test","args":[1,-2,3.5,1e300,12345678901234567890],"s":"a\\u00e9\\n\\t\\"\\\\"}',
    ' \n\t[ {"a": {"b": [null, true, false, ""]}} ] \r\n',
    '"\\ud800 lone surrogate"',
    '"caf\u00e9 \u2603 \U0001f600"',
    "0",
    "-0.0",
    '{"dup": 1, "dup": 2}',
    "[NaN, Infinity, -Infinity]",
]
REFUSED = ["", "   ", "[1,]", "{} {}", "[1] x", '"\x01"', "{'a': 1}", "[1", "01", '{"a" 1}', "tru"]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_loads_reads_what_json_reads(document: str) -> None:
    expected = json.loads(document)
    for form in (document, document.encode("utf-8", "surrogatepass")):
        assert repr(loads(form)) == repr(expected)


@pytest.mark.parametrize("document", REFUSED)
def test_loads_refuses_what_json_refuses(document: str) -> None:
    with pytest.raises(ValueError):
        json.loads(document)
    with pytest.raises(ValueError):
        loads(document)


def test_loads_refuses_bad_utf8_and_runs_the_hooks() -> None:
    with pytest.raises(UnicodeDecodeError):
        loads(b'"\xff"')
    assert loads("[1.5, 2, NaN]", parse_float=lambda text: f"float {text}", parse_constant=len) == ["float 1.5", 2, 3]


def test_deep_nesting_is_a_recursion_error() -> None:
    with pytest.raises(RecursionError):
        loads("[" * 100_000 + "]" * 100_000)


@pytest.mark.parametrize("document", DOCUMENTS[:-1])
def test_dumps_writes_what_json_writes(document: str) -> None:
    value = json.loads(document)
    assert dumps(value) == json.dumps(value, separators=(",", ":"))
    assert dumps(value, sort_keys=True) == json.dumps(value, separators=(",", ":"), sort_keys=True)


def test_dumps_refuses_what_json_refuses() -> None:
    with pytest.raises(ValueError, match="Out of range float"):
        dumps({"x": float("nan")})
    assert dumps([float("inf")], allow_nan=True) == "[Infinity]"
    circular: list[object] = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps(circular)
    with pytest.raises(TypeError, match="Object of type bytes is not JSON serializable"):
        dumps({"b": b"x"})


def test_the_harness_starts_without_enum_and_re() -> None:
    """What the harness and its worker import before a program runs leaves out the modules whose
    import costs milliseconds per container (a program that imports them pays for them)."""
    engine_dir = Path(__file__).resolve().parents[2] / "engine"
    script = (
        f"import sys; sys.path.insert(0, {str(engine_dir)!r}); "
        "import harness.harness, harness.worker, harness.runners.python; "
        "print(' '.join(sorted(set(sys.modules) & {'enum', 're', 'json', 'socket', 'signal', 'base64', 'typing'})))"
    )
    loaded = subprocess.run([sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == []
