"""The one argument the round-counting benchmarks take: ROUNDS, a positive whole number."""

from __future__ import annotations

import argparse


def rounds_argument(doc: str | None, default: int) -> int:
    """ROUNDS from the command line (``default`` without one); ``--help`` prints ``doc``, and
    anything else is refused with a message that names it."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rounds", nargs="?", type=_positive, default=default, help=f"rounds ({default})")
    rounds: int = parser.parse_args().rounds
    return rounds


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"ROUNDS must be a whole number of at least 1, not {text!r}")
    return number
