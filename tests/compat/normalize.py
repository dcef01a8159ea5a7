"""What the reward sees, in a form both implementations can be compared on.

Imported by the test (our side) and by ``reference_runner.py`` (the reference's side, in its
own interpreter), so it must not import ``engine`` or numpy.

- A results entry is ``"T"`` when it *is* ``True`` (the only thing callers test for), its
  integer when it is ``-1`` or ``-2``, and ``"F"`` for anything else (``False``, or the numpy
  booleans and arrays the reference records for some wrong answers).
- ``error_info`` dicts are compared on their keys; the wrong-answer fields (``output``,
  ``expected``, ``inputs``, ``error_message``) also on their values. Error texts are not
  compared: they carry memory addresses and interpreter details.
"""

from __future__ import annotations

from typing import Any

_VALUE_KEYS = ("output", "expected", "inputs", "error_message", "input", "res")


def result_entry(value: Any) -> Any:
    if value is True:
        return "T"
    if type(value) is int and value in (-1, -2):
        return value
    return "F"


def info(data: Any) -> Any:
    if not isinstance(data, dict):
        return repr(type(data).__name__)
    return {
        key: (info(value) if isinstance(value, dict) else value if key in _VALUE_KEYS else "<text>")
        for key, value in sorted(data.items())
    }


def check_correctness_outcome(call: Any) -> dict[str, Any]:
    try:
        results, metadata = call()
    except BaseException as exc:
        return {"raised": type(exc).__name__}
    return {"results": [result_entry(r) for r in results], "metadata": [info(m) for m in list(metadata)]}


def compute_score_outcome(call: Any) -> dict[str, Any]:
    try:
        success, metadata = call()
    except BaseException as exc:
        return {"raised": type(exc).__name__}
    if isinstance(success, bool) or success is None:
        shown: Any = "T" if success is True else "F"
    else:
        shown = round(float(success), 6)
    if isinstance(metadata, list):
        meta: Any = [info(m) for m in metadata]
    elif metadata is None:
        meta = None
    else:
        meta = info(metadata)
    return {"success": shown, "metadata": meta}


_FAILED = ("failed: ", "failed with error:\n", "Error: ")


def _without_error(text: str) -> str:
    """A reason with the error it quotes (tracebacks, file names, engine details) cut off."""
    for marker in _FAILED:
        if marker in text:
            return text[: text.index(marker) + len(marker)] + "<error>"
    return text


def reward_outcome(call: Any) -> dict[str, Any]:
    """A reward-kit result as comparable data: scores rounded, error texts cut off, each test's
    record in ``test_results`` parsed."""
    import json

    try:
        result = call()
    except BaseException as exc:
        return {"raised": type(exc).__name__}
    metrics = {}
    for name, found in sorted(result.metrics.items()):
        reason = found.reason
        if name == "test_results" and reason.startswith("["):
            records = json.loads(reason)
            for record in records:
                if "error" in record:
                    record["error"] = "<error>"
                    record["details"] = "Error: <error>"
            reason = records
        elif name in ("execution_error_details", "execution_metadata"):
            # APPS metadata: JSON of the error dicts, compared as ``info`` compares them.
            parsed = json.loads(reason)
            reason = [info(m) for m in parsed] if isinstance(parsed, list) else info(parsed)
        else:
            reason = _without_error(reason)
        metrics[name] = [round(found.score, 6), found.is_score_valid, reason]
    return {
        "score": round(result.score, 6),
        "valid": result.is_score_valid,
        "reason": _without_error(result.reason or ""),
        "metrics": metrics,
    }
