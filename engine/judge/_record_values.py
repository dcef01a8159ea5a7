"""Values in data set records: JSON with integers of any length, code in a model's fenced
answer, and the error a record that cannot be judged raises."""

from __future__ import annotations

import json
import re
from typing import Any

from .._languages import TOOLCHAINS

__all__ = ["MAX_INT_DIGITS", "DatasetError", "extract_code", "integer_text", "load_json"]

# How a fenced block in a model's answer names each language.
FENCE_TAGS: dict[str, tuple[str, ...]] = {chain.language: chain.names.fences for chain in TOOLCHAINS}


class DatasetError(ValueError):
    """A record that cannot be judged, and why."""


# Integers longer than Python converts from decimal by itself (4300 digits) are read in halves;
# past this many digits a record is refused, since the conversion grows faster than the text.
MAX_INT_DIGITS = 1_000_000
_PLAIN_INT_DIGITS = 4000


def _integer(text: str) -> int:
    """A JSON integer of any length up to ``MAX_INT_DIGITS``, in time well below quadratic."""
    digits = text.lstrip("-")
    if len(digits) <= _PLAIN_INT_DIGITS:
        return int(text)
    if len(digits) > MAX_INT_DIGITS:
        raise DatasetError(f"an integer of {len(digits)} digits is longer than the {MAX_INT_DIGITS} digits read")
    value = _decimal_digits(digits)
    return -value if text.startswith("-") else value


def _decimal_digits(digits: str) -> int:
    if len(digits) <= _PLAIN_INT_DIGITS:
        return int(digits)
    low = len(digits) // 2
    scale: int = 10**low
    return _decimal_digits(digits[:-low]) * scale + _decimal_digits(digits[-low:])


def integer_text(value: int) -> str:
    """``str(value)`` for an integer of any length (the inverse of reading one)."""
    if value < 0:
        return "-" + integer_text(-value)
    if value.bit_length() <= 3 * _PLAIN_INT_DIGITS:
        return str(value)
    low = int(value.bit_length() * 0.30103) // 2  # half its decimal digits
    high, rest = divmod(value, 10**low)
    return integer_text(high) + integer_text(rest).rjust(low, "0")


def load_json(text: str | bytes) -> Any:
    """JSON from a data set or a request, integers of any length included (a big-number problem's
    arguments); ``ValueError`` (``DatasetError`` for an integer past ``MAX_INT_DIGITS``) or
    ``RecursionError`` when it cannot be read."""
    return json.loads(text, parse_int=_integer)


def extract_code(text: str, language: str = "python") -> str:
    """The last fenced block of ``language`` (by any of its usual tags) in a model's answer, or
    the answer itself."""
    tags = "|".join(re.escape(tag) for tag in FENCE_TAGS.get(language, (language,)))
    blocks = re.findall(rf"```(?:{tags})[ \t]*\n(.*?)(?:```|\Z)", text, flags=re.DOTALL | re.IGNORECASE)
    return blocks[-1] if blocks else text
