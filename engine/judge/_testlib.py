"""What a checker program that speaks testlib's protocol said: its exit code is the verdict and
its stderr the message, after the verdict's name that testlib writes first."""

from __future__ import annotations

import math

from ._compare import clip
from ._protocol import Observation, Status

# The files a checker program is given, in the order of its arguments (testlib's names).
CHECKER_FILES = ("input", "output", "answer")

ACCEPTED, WRONG_ANSWER, PRESENTATION_ERROR, JUDGE_FAILURE, POINTS = 0, 1, 2, 3, 7
_VERDICT_NAMES = ("ok ", "wrong answer ", "wrong output format ", "FAIL ", "points ")


def testlib_answer(observation: Observation) -> tuple[float, str | None] | str:
    """The score and message a checker program gave, or why it gave no usable answer."""
    if observation.status not in (Status.OK, Status.RUNTIME_ERROR) or observation.signal is not None:
        return observation.error.message if observation.error else f"it ended with {observation.status.value}"
    message = _message(observation.stderr)
    match observation.exit_code:
        case 0:
            return 1.0, message
        case 1:
            return 0.0, message
        case 2:
            return 0.0, f"presentation error: {message}" if message else "presentation error"
        case 3:
            return f"it reported its own failure: {message or 'without a message'}"
        case 7:
            return _points(message)
        case code:
            return f"it exited with {code}, which is no verdict of testlib's protocol (0, 1, 2, 3 or 7)"


def _message(stderr: str) -> str | None:
    text = stderr.strip()
    for name in _VERDICT_NAMES:
        if text.startswith(name) or text == name.strip():
            text = text[len(name) :].strip()
            break
    return clip(text) if text else None


def _points(message: str | None) -> tuple[float, str | None] | str:
    number, _, rest = (message or "").partition(" ")
    try:
        score = float(number)
    except ValueError:
        return f"it gave points (exit code 7) without a number first: {message!r}"
    if not (math.isfinite(score) and 0 <= score <= 1):
        return f"it gave {number} points; a test's points are a score from 0 to 1"
    return score, rest.strip() or None
