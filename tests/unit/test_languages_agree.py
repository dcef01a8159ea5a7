"""A language lives in one place (its toolchain in ``engine/_languages.py``): every table made
elsewhere, by a dialect, a data set layout or the docs, agrees with it."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from engine import Language
from engine._languages import LANGUAGE_NAMES, TOOLCHAINS, toolchain
from engine.judge import _published
from engine.judge._record_values import FENCE_TAGS
from engine.runtime._images import IMAGES
from engine.serve import _piston, _sandbox_fusion

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_language_has_one_toolchain_and_an_image() -> None:
    assert typing.get_args(Language) == LANGUAGE_NAMES
    assert all(chain.image in IMAGES for chain in TOOLCHAINS)
    for chain in TOOLCHAINS:
        assert chain.hello.strip() and (not chain.compiles or (chain.commands and chain.commands.compile))


def test_each_dialects_names_come_from_the_toolchains() -> None:
    assert {language for language, *_ in _piston.RUNTIMES} == set(LANGUAGE_NAMES)
    names = [name for chain in TOOLCHAINS for name in (chain.names.piston, *chain.names.piston_aliases)]
    assert len(names) == len(set(names)) == len(_piston.ALIASES)
    assert set(_sandbox_fusion.LANGUAGES.values()) == set(LANGUAGE_NAMES)
    # The request model's literal (its schema in /openapi.json) names exactly what is served.
    assert set(typing.get_args(_sandbox_fusion.FusionLanguage)) == set(_sandbox_fusion.LANGUAGES)
    assert set(FENCE_TAGS) == set(LANGUAGE_NAMES)
    fences = [tag for tags in FENCE_TAGS.values() for tag in tags]
    assert len(fences) == len(set(fences))


def test_published_layouts_name_only_languages_there_are() -> None:
    tables = (
        _published._HUMANEVAL_X_LANGUAGES,
        _published._MULTIPL_E_LANGUAGES,
        _published._CODE_CONTESTS_LANGUAGES,
    )
    assert all(set(table.values()) <= set(LANGUAGE_NAMES) for table in tables)


def test_the_docs_list_every_language() -> None:
    table = re.findall(r"^\| `(\w+)` \| `(\w+)`", (DOCS / "scoring.md").read_text(), re.MULTILINE)
    assert dict(table) == {chain.language: chain.image for chain in TOOLCHAINS}


def test_a_program_of_several_files_compiles_the_sources_its_compiler_takes() -> None:
    cpp = toolchain("cpp")
    commands = cpp.with_sources(cpp.commands, ["add.h", "b.cpp", "a.cc", "notes.txt"])
    assert commands is not None and commands.compile is not None
    at = commands.compile.index("{source}")
    assert commands.compile[at : at + 3] == ("{source}", "{dir}/a.cc", "{dir}/b.cpp")
    python = toolchain("python")
    assert python.with_sources(python.commands, ["helper.py"]) is None
    go = toolchain("go")
    assert go.with_sources(go.commands, ["other.go"]) == go.commands
