"""The languages a program may be written in: the image that runs each, the test kinds it
takes, and how the harness's process runner compiles and runs it (Python has a runner of its
own, which loads a program once and forks per test)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from ._models import Language
from .judge._protocol import ProcessCommands

__all__ = ["LANGUAGE_NAMES", "Toolchain", "toolchain"]

# Where a compiled program is written, in its folder.
BINARY = "{dir}/main"
# One JVM per test: a small, quick-starting one. Judges give Java a deep stack. Its heap may
# grow past the container's memory (the reservation is only address space), so that running out
# of memory is the container's memory limit, as in every other language, rather than an
# OutOfMemoryError at the heap's default share of it.
JAVA_RUN = (
    "java",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Xshare:auto",
    "-Xss64m",
    "-Xmx16g",
)
JAVAC_JVM = ("-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1", "-J-XX:-UsePerfData")
# A public top-level type names its file; a program without one runs as Main. Comments and
# literals are blanked out before looking (a `public class Decoy` in either is text), each form
# consumed whole or to the end of the source, so that the scan is linear.
_JAVA_NOT_CODE = re.compile(
    r"//[^\n]*+"  # a line comment
    r"|/\*(?:.*?\*/|.*)"  # a block comment
    r'|"""(?:.*?[^\\]"""|.*)'  # a text block
    r'|"(?:\\.|[^"\\\n])*+"?'  # a string
    r"|'(?:\\.|[^'\\\n])*+'?",  # a character
    re.DOTALL,
)
# What decides the public type, once literals and comments are gone: braces, declaration ends,
# `public`, and a type declaration with its name.
_JAVA_TOKEN = re.compile(r"[{};]|\bpublic\b|\b(?:class|interface|enum|record)\s+([A-Za-z_$][\w$]*)")


def java_public_type(code: str) -> str | None:
    """The name of the program's public top-level class (interface, enum or record), if any."""
    blanked = _JAVA_NOT_CODE.sub(lambda found: " " * len(found.group()), code)
    depth, public = 0, False
    for token in _JAVA_TOKEN.finditer(blanked):
        text = token.group()
        if text in "{};":
            depth += {"{": 1, "}": -1, ";": 0}[text]
            public = False
        elif text == "public":
            public = True
        elif depth == 0 and public:
            return token.group(1)
    return None


class Toolchain(BaseModel):
    """How one language runs: its image and test kinds, and the process runner's commands
    (None for Python's own runner)."""

    model_config = ConfigDict(frozen=True)

    language: Language
    image: str
    kinds: frozenset[str]
    commands: ProcessCommands | None = None
    runs_builds: bool = Field(False, description="its program is a binary the compiler wrote (an executable /tmp)")
    standards: tuple[str, ...] = Field((), description="the language standards a submission may pick (-std=)")
    function_runner: str | None = Field(
        None, description="the harness's runner for call and assert tests, when not Python's own"
    )

    def commands_for(self, code: str, standard: str | None = None) -> ProcessCommands | None:
        """The commands for this program (Java's depend on its public class's name; C's and
        C++'s on the standard it picks)."""
        if standard is not None:
            if not self.standards or self.commands is None or self.commands.compile is None:
                raise ValueError(f"{self.language} has no standard to pick; C and C++ have")
            if standard not in self.standards:
                raise ValueError(f"{standard!r} is not a {self.language} standard: {', '.join(self.standards)}")
            compile = tuple(f"-std={standard}" if part.startswith("-std=") else part for part in self.commands.compile)
            return self.commands.model_copy(update={"compile": compile})
        if self.language != "java" or self.commands is None:
            return self.commands
        name = java_public_type(code) or "Main"
        return ProcessCommands(
            source=f"{name}.java",
            compile=self.commands.compile,
            run=(*JAVA_RUN, "-cp", "{dir}", name),
        )


_SCRIPT_KINDS = frozenset({"stdin", "run"})
# Libraries users' C and C++ assume (GMP; OpenSSL's hashes, as HumanEval-X's MD5 problem does);
# linked only where a program uses them, so the others load nothing more.
_LIBRARIES = ("-Wl,--as-needed", "-lgmp", "-lssl", "-lcrypto")
_CPP_LIBRARIES = ("-Wl,--as-needed", "-lgmpxx", "-lgmp", "-lssl", "-lcrypto")
_TOOLCHAINS: dict[Language, Toolchain] = {
    "python": Toolchain(language="python", image="python", kinds=frozenset({"stdin", "run", "call", "assert"})),
    "c": Toolchain(
        language="c",
        runs_builds=True,
        standards=("c89", "c99", "c11", "c17", "c2x", "gnu89", "gnu99", "gnu11", "gnu17", "gnu2x"),
        image="cpp",
        kinds=_SCRIPT_KINDS,
        commands=ProcessCommands(
            source="main.c",
            compile=("gcc", "-O2", "-std=gnu17", "-pipe", "-o", BINARY, "{source}", "-lm", *_LIBRARIES),
            run=(BINARY,),
        ),
    ),
    "cpp": Toolchain(
        language="cpp",
        runs_builds=True,
        standards=tuple(f"{base}++{year}" for base in ("c", "gnu") for year in ("11", "14", "17", "20", "23")),
        image="cpp",
        kinds=_SCRIPT_KINDS,
        commands=ProcessCommands(
            source="main.cpp",
            compile=("g++", "-O2", "-std=gnu++17", "-pipe", "-o", BINARY, "{source}", *_CPP_LIBRARIES),
            run=(BINARY,),
        ),
    ),
    "java": Toolchain(
        language="java",
        image="java",
        kinds=_SCRIPT_KINDS,
        commands=ProcessCommands(
            source="Main.java",
            compile=(
                "javac",
                "-J-XX:+UseSerialGC",
                "-J-XX:TieredStopAtLevel=1",
                "-encoding",
                "UTF-8",
                "-d",
                "{dir}",
                "{source}",
            ),
            run=(*JAVA_RUN, "-cp", "{dir}", "Main"),
        ),
    ),
    "javascript": Toolchain(
        language="javascript",
        image="javascript",
        kinds=_SCRIPT_KINDS | {"call", "assert"},
        function_runner="node",
        commands=ProcessCommands(source="main.js", run=("node", "{source}")),
    ),
    "typescript": Toolchain(
        language="typescript",
        image="javascript",
        kinds=_SCRIPT_KINDS,
        commands=ProcessCommands(
            source="main.ts",
            compile=("node", "/opt/airlock/tsc.js", "{source}", "{dir}/main.js"),
            run=("node", "{dir}/main.js"),
        ),
    ),
    "go": Toolchain(
        language="go",
        runs_builds=True,
        image="go",
        kinds=_SCRIPT_KINDS,
        commands=ProcessCommands(
            source="main.go", compile=("/opt/airlock/go-build", "{source}", BINARY), run=(BINARY,)
        ),
    ),
    "rust": Toolchain(
        language="rust",
        runs_builds=True,
        image="rust",
        kinds=_SCRIPT_KINDS,
        commands=ProcessCommands(
            source="main.rs",
            compile=("rustc", "-O", "--edition", "2021", "-o", BINARY, "{source}"),
            run=(BINARY,),
        ),
    ),
}

LANGUAGE_NAMES: tuple[Language, ...] = tuple(_TOOLCHAINS)


def toolchain(language: str) -> Toolchain:
    """The toolchain of ``language``; a ValueError naming the languages there are otherwise."""
    try:
        return _TOOLCHAINS[language]  # type: ignore[index]
    except KeyError:
        raise ValueError(f"unknown language {language!r}; the languages are {', '.join(LANGUAGE_NAMES)}") from None
