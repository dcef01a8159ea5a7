"""Where the recipes that ship beside the code live (``images/`` and ``seccomp/``).

A wheel carries them inside the package as ``engine/_resources/``; a source checkout has them
at the repository's top level.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["resource_path"]

_PACKAGE = Path(__file__).resolve().parent.parent


def resource_path(*parts: str) -> Path:
    for root in (_PACKAGE / "_resources", _PACKAGE.parent):
        candidate = root.joinpath(*parts)
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"{'/'.join(parts)} is missing from this installation of airlock")
