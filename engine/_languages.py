"""The languages a program may be written in: the image that runs each, the test kinds it
takes, and how the harness's process runner compiles and runs it (Python has a runner of its
own, which loads a program once and forks per test)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from ._models import Language
from .judge._protocol import ProcessCommands

__all__ = ["LANGUAGE_NAMES", "TOOLCHAINS", "Names", "Toolchain", "toolchain"]

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


class Names(BaseModel):
    """What a language is called where Airlock meets other tools: the one place each dialect's
    table is made from."""

    model_config = ConfigDict(frozen=True)

    piston: str = Field(description="Piston's runtime name")
    piston_aliases: tuple[str, ...] = Field((), description="the other names Piston accepts")
    version: str = Field(description="the version the image holds, as Piston reports it")
    sandbox_fusion: tuple[str, ...] = Field(description="SandboxFusion's names for it")
    fences: tuple[str, ...] = Field(description="how a fenced block in a model's answer names it")


class Toolchain(BaseModel):
    """Everything about one language: its image and test kinds, the process runner's commands
    (None for Python's own runner), its names in every dialect, and a program that prints
    ``hello`` (its self-test). Adding a language is one entry here and its image's recipe."""

    model_config = ConfigDict(frozen=True)

    language: Language
    image: str
    kinds: frozenset[str]
    names: Names
    hello: str = Field(description="a program that prints hello and a newline")
    compiles: bool = Field(False, description="it is compiled in a stage of its own before it runs")
    commands: ProcessCommands | None = None
    runs_builds: bool = Field(False, description="its program is a binary the compiler wrote (an executable /tmp)")
    standards: tuple[str, ...] = Field((), description="the language standards a submission may pick (-std=)")
    source_suffixes: tuple[str, ...] = Field(
        (), description="the files beside the program its compiler builds with it (a program of several files)"
    )
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

    def with_sources(self, commands: ProcessCommands | None, names: Iterable[str]) -> ProcessCommands | None:
        """``commands`` compiling, with the program, the files among ``names`` (more files beside
        it, as Piston's requests give) that are sources its compiler takes too."""
        extra = sorted(name for name in names if self.source_suffixes and name.endswith(self.source_suffixes))
        if commands is None or commands.compile is None or not extra:
            return commands
        at = commands.compile.index("{source}") + 1
        compile = (*commands.compile[:at], *(f"{{dir}}/{name}" for name in extra), *commands.compile[at:])
        return commands.model_copy(update={"compile": compile})


_SCRIPT_KINDS = frozenset({"stdin", "run"})
# Libraries users' C and C++ assume (GMP; OpenSSL's hashes, as HumanEval-X's MD5 problem does);
# linked only where a program uses them, so the others load nothing more.
_LIBRARIES = ("-Wl,--as-needed", "-lgmp", "-lssl", "-lcrypto")
_CPP_LIBRARIES = ("-Wl,--as-needed", "-lgmpxx", "-lgmp", "-lssl", "-lcrypto")
_TOOLCHAINS: dict[Language, Toolchain] = {
    "python": Toolchain(
        language="python",
        image="python",
        kinds=frozenset({"stdin", "run", "call", "assert"}),
        names=Names(
            piston="python",
            piston_aliases=("py", "py3", "python3"),
            version="3.11.2",
            sandbox_fusion=("python",),
            fences=("python3", "python", "py"),
        ),
        hello='print("hello")\n',
    ),
    "c": Toolchain(
        language="c",
        names=Names(piston="c", piston_aliases=("gcc",), version="12.2.0", sandbox_fusion=("c",), fences=("c",)),
        source_suffixes=(".c",),
        hello='#include <stdio.h>\nint main(void) { puts("hello"); }\n',
        compiles=True,
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
        source_suffixes=(".cpp", ".cc", ".cxx"),
        names=Names(
            piston="c++",
            piston_aliases=("cpp", "g++"),
            version="12.2.0",
            sandbox_fusion=("cpp",),
            fences=("cpp", "c++", "cxx", "cc"),
        ),
        hello='#include <iostream>\nint main() { std::cout << "hello" << std::endl; }\n',
        compiles=True,
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
        source_suffixes=(".java",),
        names=Names(piston="java", version="17.0.0", sandbox_fusion=("java",), fences=("java",)),
        hello=(
            "public class Main {\n    public static void main(String[] args) {\n"
            '        System.out.println("hello");\n    }\n}\n'
        ),
        compiles=True,
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
        names=Names(
            piston="javascript",
            piston_aliases=("node-javascript", "node-js", "js", "node"),
            version="18.20.4",
            sandbox_fusion=("nodejs", "javascript"),
            fences=("javascript", "js", "node"),
        ),
        hello='console.log("hello");\n',
        image="javascript",
        kinds=_SCRIPT_KINDS | {"call", "assert"},
        function_runner="node",
        commands=ProcessCommands(source="main.js", run=("node", "{source}")),
    ),
    "typescript": Toolchain(
        language="typescript",
        names=Names(
            piston="typescript",
            piston_aliases=("ts", "node-typescript"),
            version="4.8.4",
            sandbox_fusion=("typescript",),
            fences=("typescript", "ts"),
        ),
        hello='const greeting: string = "hello";\nconsole.log(greeting);\n',
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
        names=Names(
            piston="go", piston_aliases=("golang",), version="1.19.0", sandbox_fusion=("go",), fences=("go", "golang")
        ),
        hello='package main\n\nimport "fmt"\n\nfunc main() {\n    fmt.Println("hello")\n}\n',
        compiles=True,
        runs_builds=True,
        image="go",
        kinds=_SCRIPT_KINDS,
        commands=ProcessCommands(
            source="main.go", compile=("/opt/airlock/go-build", "{source}", BINARY), run=(BINARY,)
        ),
    ),
    "rust": Toolchain(
        language="rust",
        names=Names(
            piston="rust", piston_aliases=("rs",), version="1.63.0", sandbox_fusion=("rust",), fences=("rust", "rs")
        ),
        hello='fn main() {\n    println!("hello");\n}\n',
        compiles=True,
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
TOOLCHAINS: tuple[Toolchain, ...] = tuple(_TOOLCHAINS.values())


def toolchain(language: str) -> Toolchain:
    """The toolchain of ``language``; a ValueError naming the languages there are otherwise."""
    try:
        return _TOOLCHAINS[language]  # type: ignore[index]
    except KeyError:
        raise ValueError(f"unknown language {language!r}; the languages are {', '.join(LANGUAGE_NAMES)}") from None
