"""Attacks on what the host decides from a program's text and output, before or after any
container runs: how numbers are read, which file a Java program is compiled as. They need no
sandbox; the ones that run a program are in the language and integration suites."""

from __future__ import annotations

import pytest

from engine._languages import java_public_type, toolchain
from engine.judge._comparators import compare_stdout

# "123" in other scripts: Arabic-Indic, fullwidth, Devanagari, mathematical bold.
FOREIGN_DIGITS = ["١٢٣", "１２３", "१२३", "𝟏𝟐𝟑", "123.٠", "-١٢٣", "1e٣"]


@pytest.mark.parametrize("printed", FOREIGN_DIGITS)
def test_only_ascii_digits_are_numbers(printed: str) -> None:
    expected = "-123" if printed.startswith("-") else "1000" if "e" in printed else "123"
    assert compare_stdout(printed + "\n", expected + "\n", "standard").passed is False
    assert compare_stdout("123.0\n", "123\n", "standard").passed is True


@pytest.mark.parametrize(
    "decoy",
    [
        "/*\npublic class Decoy {}\n*/",
        "/**\n * public class Decoy {}\n */",
        '  static String note = """\npublic class Decoy {}\n""";',
        '  static String note = "public class Decoy {";',
        "  static char brace = '{';\n// public class Decoy",
        "  public static class Nested {}",
    ],
)
def test_a_public_class_in_a_comment_or_literal_names_no_file(decoy: str) -> None:
    inside = decoy.startswith("  ")
    code = f"class Main {{\n{decoy}\n}}\n" if inside else f"{decoy}\nclass Main {{}}\n"
    assert java_public_type(code) is None
    commands = toolchain("java").commands_for(code)
    assert commands is not None and commands.source == "Main.java"
    assert java_public_type(f"{code}public final class Real {{}}\n") == "Real"
