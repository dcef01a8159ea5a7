"""Execution as a reference ``run_test`` does it, inside the sandbox: verl 0.9 ``prime_code``'s
(the ``verl`` flavour) or reward-kit 0.4.1's APPS variant (``reward_kit_apps``: standard-input
programs only, reshaped its own way, no guard but its faulthandler and thread settings).

Only the *execution* half lives here: the import prelude, the turning of a script into a
``code()`` function, the process-wide "reliability guard", the patched standard input and the
captured standard output, one shared module for all tests. The comparison half (which needs
the expected outputs) stays on the host, in ``engine.compat.prime_code``. Everything here runs
in the submission's own process and is therefore untrusted; it only reports observations.
"""

from __future__ import annotations

import builtins
import io
import os
import sys
import types

from . import codec
from ._lean import loads
from ._typing import TYPE_CHECKING
from .channel import Channel
from .runners.boundary import names_used

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# Star imports, in the reference's order (later ones shadow earlier names), then the modules
# themselves (so `copy`, `bisect`, `random`... are modules), then a deep recursion limit.
_MODULES = (
    "string",
    "re",
    "datetime",
    "collections",
    "heapq",
    "bisect",
    "copy",
    "math",
    "random",
    "statistics",
    "itertools",
    "functools",
    "operator",
    "io",
    "sys",
    "json",
)
PRELUDE = (
    "".join(f"from {name} import *\n" for name in (*_MODULES, "builtins", "typing"))
    + "".join(f"import {name}\n" for name in _MODULES)
    + "sys.setrecursionlimit(6*10**5)\n"
)
PRELUDE_LINES = PRELUDE.splitlines(keepends=True)
# What each star import of the prelude binds in the image's interpreter, written when the image
# is built (``star_exports``): a program's prelude keeps only the lines that bind a name it names.
EXPORTS_FILE = "/opt/airlock/prelude-exports.json"
# The lines of modules every process holds, which cost nothing, and whose star imports bind what
# the process holds at that moment (the guard's exit and quit are None), not what the image's
# interpreter exported; and the recursion limit.
_ALWAYS_KEPT = ("from builtins ", "from sys ", "import sys", "sys.")
# Names through which a program reaches globals it does not name, or has annotations that are
# strings evaluated later: such a program gets the whole prelude.
_DYNAMIC_NAMES = frozenset(
    {
        "globals", "vars", "dir", "locals", "eval", "exec", "__import__", "import_module", "__dict__",
        "__globals__", "f_globals", "modules", "_getframe", "currentframe", "inspect", "tmp_sol",
        "__main__", "doctest", "annotations", "__annotations__", "get_type_hints", "dataclass",
        "dataclasses", "singledispatch", "singledispatchmethod", "register",
    }
)  # fmt: skip
PROGRAM_FILE = "<string>"
APPS = "reward_kit_apps"
# reward-kit loads the program as a module of this name, which it does not register.
APPS_MODULE = "tmp_sol_std_input"
_DISABLED_OS = (
    "kill",
    "system",
    "putenv",
    "remove",
    "removedirs",
    "rmdir",
    "fchdir",
    "setuid",
    "fork",
    "forkpty",
    "killpg",
    "rename",
    "renames",
    "truncate",
    "replace",
    "unlink",
    "fchmod",
    "fchown",
    "chmod",
    "chown",
    "chroot",
    "lchflags",
    "lchmod",
    "lchown",
    "getcwd",
    "chdir",
)
_BLOCKED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter", "subprocess", "ctypes")


def preloaded(code: str, fn_name: str | None) -> tuple[str, ...]:
    """The modules of the reference's process that running ``code`` uses or may import, loaded
    once in the worker. The reference holds unittest.mock (with asyncio) and numpy for every
    program, imported before its guard, which stops any later import of them (they import
    subprocess). Here a program gets each only where it may use it: a standard-input session
    patches with unittest.mock where the program may reach the ``open`` it patches, and a
    program may import what it names. A container is spared 30 ms of CPU for the first and 50-60
    ms for the second. The prelude's modules are those of the lines ``prelude_for`` keeps."""
    mock = "mock" in code or "asyncio" in code or (fn_name is None and may_open(code))
    words = set(prelude_for(code, fn_name).split())
    modules = [name for name in (*_MODULES, "typing") if name in words]
    return (*modules, *(["unittest.mock"] if mock else []), *(["numpy"] if "numpy" in code else []))


def star_exports() -> dict[str, list[str]]:
    """What ``from M import *`` binds, for each module M of the prelude's star imports."""
    exports = {}
    for name in (*_MODULES, "builtins", "typing"):
        namespace: dict[str, Any] = {}
        exec(f"from {name} import *", namespace)
        exports[name] = sorted(key for key in namespace if key != "__builtins__")
    return exports


def prelude_for(code: str, fn_name: str | None) -> str:
    """The prelude as far as ``code`` can tell it from the reference's: every line that gives a
    name the program names (in any of its code, attributes too, or as ``fn_name``) its final
    value; the others blank, so that the program's lines keep the reference's numbers. A name
    the program never names has no way in but those of ``_DYNAMIC_NAMES``, which get the whole
    prelude, as does a program that does not compile on its own (the reference's build error
    follows). Importing all of the prelude's modules costs a container about 7 ms of CPU; the
    reference pays it once per process."""
    if (code, fn_name) not in _preludes:
        _preludes[code, fn_name] = _prelude_for(code, fn_name)
    return _preludes[code, fn_name]


# The worker works it out for its imports, and the session it forks finds it here.
_preludes: dict[tuple[str, str | None], str] = {}


def _names(code: str) -> set[str] | None:
    """Every name ``code`` names; None where it may reach any name (``_DYNAMIC_NAMES``) or does
    not compile on its own."""
    try:
        names = names_used(compile(code, PROGRAM_FILE, "exec", dont_inherit=True))
    except (ValueError, SyntaxError):
        return None
    return None if names & _DYNAMIC_NAMES else names


def may_open(code: str) -> bool:
    """Whether a standard-input program may reach the builtin ``open``, which the reference
    patches with a mock while a test runs: it names it, may reach any name, or imports a module
    past its leading lines (that module's own code then runs under the patch)."""
    names = _names(code)
    if names is None or "open" in names:
        return True
    body = code.split("\n")
    while body and body[0].startswith(("from ", "import ")):
        body.pop(0)
    return any("import" in line for line in body)


def _prelude_for(code: str, fn_name: str | None) -> str:
    names = _names(code)
    try:
        with open(EXPORTS_FILE, "rb") as file:
            exports = loads(file.read())
    except (OSError, ValueError):
        return PRELUDE
    if names is None:
        return PRELUDE
    names.add(fn_name or "code")  # the session looks the function up
    final: dict[str, int] = {}
    for index, line in enumerate(PRELUDE_LINES):
        words = line.split()
        if words[0] == "from":
            final.update(dict.fromkeys(exports.get(words[1], ()), index))
        elif words[0] == "import":
            final[words[1]] = index
    kept = {final[name] for name in names if name in final}
    return "".join(
        line if index in kept or line.startswith(_ALWAYS_KEPT) else "\n" for index, line in enumerate(PRELUDE_LINES)
    )


def unwrap_main_block(code: str) -> str:
    """The program with a trailing ``if __name__ == '__main__':`` block (in exactly that rendered
    form) replaced by its body, as both references do before reshaping a program."""
    if code.isascii() and "__name__" not in code:
        # No such block can be there (only a non-ASCII name can spell __name__ otherwise), and
        # the ast module, with enum and contextlib, is 2-3 ms of a container's CPU.
        return code
    import ast

    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            # unparse takes a list of statements too, and the references rely on it.
            return ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001, S110 - unparsable or empty programs are left as they are
        pass
    return code


def script_as_function(code: str) -> str:
    """The reference's textual transformation of a stdin program into ``def code():``.

    The trailing ``__main__`` block is unwrapped first. Then every line that does not start with
    ``from ``/``import `` gets a TAB; leading import lines stay at module level, and the function
    header goes before the first other line.
    """
    code = unwrap_main_block(code)
    pieces: list[str] = []
    started = False
    for line in code.split("\n"):
        is_import = line.startswith(("from ", "import "))
        if not is_import and not started:
            pieces.append("stdin = sys.stdin\nstdout = sys.stdout\ndef code():\n")
            started = True
        pieces.append(("\t" if started else "") + line + "\n")
    return "".join(pieces)


def apps_script_as_function(code: str) -> str:
    """reward-kit's APPS reshaping of a stdin program into ``def code():``.

    The trailing ``__main__`` block is unwrapped as verl does; then the text is dedented, a
    ``main()`` call is appended when ``def main(`` occurs and no line starts with a call of it,
    and every line whose stripped text starts with ``from ``/``import `` (wherever it is, even
    inside a function or a string) moves, stripped, to module level; every other line gets a TAB.
    """
    import re
    import textwrap

    code = textwrap.dedent(unwrap_main_block(code))
    imports, body = [], []
    for line in code.split("\n"):
        stripped = line.strip()
        if stripped.startswith(("from ", "import ")):
            imports.append(stripped + "\n")
        else:
            body.append("\t" + line)
    if "def main(" in code and re.search(r"^\s*main\s*\(\s*\)", code, re.MULTILINE) is None:
        body.append("\tmain()")
    return "".join(imports) + "stdin = sys.stdin\nstdout = sys.stdout\ndef code():\n" + "\n".join(body)


def clean_traceback(text: str) -> str:
    """Cut a traceback so it starts at the program's first frame, as the reference does."""
    return "Traceback (most recent call last):\n  " + text[text.find(f'File "{PROGRAM_FILE}"') :]


def apply_guard() -> None:
    """The reference's ``reliability_guard()``: it changes the process for good."""
    import faulthandler
    import shutil

    faulthandler.disable()
    builtins.exit = None  # type: ignore[assignment]
    builtins.quit = None  # type: ignore[assignment]
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in _DISABLED_OS:
        setattr(os, name, None)
    shutil.rmtree = None  # type: ignore[assignment]
    shutil.move = None  # type: ignore[assignment]
    shutil.chown = None  # type: ignore[assignment]
    # A subprocess module that nothing has imported yet is out of reach once it is blocked below:
    # importing it only to disable Popen would cost every container 2 ms.
    subprocess = sys.modules.get("subprocess")
    if subprocess is not None:
        subprocess.Popen = None  # type: ignore[attr-defined]
    builtins.help = None  # type: ignore[assignment]
    for name in _BLOCKED_MODULES:
        sys.modules[name] = None  # type: ignore[assignment]


def _error(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": repr(exc), "traceback": _traceback_text()}


def _traceback_text() -> str:
    import traceback  # only when there is an error: this module loads once per container

    return clean_traceback(traceback.format_exc())


class _Replacement:
    """``mock.patch.object``'s replacement and its undo, for a program that cannot reach the one
    patch that needs unittest.mock (``open``): importing it, with asyncio, is 30 ms of CPU."""

    def __init__(self, target: Any, attribute: str, new: Any) -> None:
        self.target, self.attribute, self.new = target, attribute, new
        self.original: Any = None
        self.own = False

    def start(self) -> None:
        self.own = self.attribute in getattr(self.target, "__dict__", {})
        self.original = getattr(self.target, self.attribute)
        setattr(self.target, self.attribute, self.new)

    def stop(self) -> None:
        if self.own:
            setattr(self.target, self.attribute, self.original)
        else:
            delattr(self.target, self.attribute)


def _run_with_patched_stdin(
    method: Callable[[], Any], text: str, mock: types.ModuleType | None, line_end: str = ""
) -> None:
    """Call ``method()`` the way the reference feeds it standard input.

    The patches are entered in the reference's order: ``read``, ``readlines`` and ``readline``
    of the process's real stdin object first (their lines end with ``line_end``: nothing in
    verl's, a newline in reward-kit's), then ``sys.stdin`` itself, then ``open`` (with
    unittest.mock, where the program may reach ``open``; else the same replacements without it).
    ``SystemExit`` is swallowed; anything else propagates.
    """
    lines = iter(text.split("\n"))
    real_stdin = sys.stdin
    replacements = [
        (real_stdin, "read", lambda *args: text),
        (real_stdin, "readlines", lambda *args: [x + line_end for x in text.split("\n")]),
        (real_stdin, "readline", lambda *args: next(lines) + line_end),
    ]
    patches: list[Any] = (
        [_Replacement(*replacement) for replacement in replacements] + [_Replacement(sys, "stdin", io.StringIO(text))]
        if mock is None
        else [mock.patch.object(*replacement) for replacement in replacements]
        + [mock.patch("sys.stdin", io.StringIO(text)), mock.patch("builtins.open", mock.mock_open(read_data=text))]
    )
    for patch in patches:
        patch.start()
    try:
        method()
    except SystemExit:
        pass
    finally:
        for patch in reversed(patches):
            patch.stop()


def _captured(
    method: Callable[[], Any], text: str, flavour: str, mock: types.ModuleType | None
) -> tuple[str, BaseException | None]:
    """Run with stdout captured in a StringIO whose ``close`` does nothing (verl's takes one
    argument, reward-kit's none)."""
    saved = sys.stdout
    buffer = io.StringIO()
    if flavour == APPS:
        buffer.close = lambda: None  # type: ignore[method-assign]
    else:
        buffer.close = lambda x: 1  # type: ignore[assignment, method-assign, misc]
    sys.stdout = buffer
    try:
        _run_with_patched_stdin(method, text, mock, "\n" if flavour == APPS else "")
        failure: BaseException | None = None
    except Exception as exc:  # noqa: BLE001 - reported as the reference reports it
        failure = exc
        error = _error(exc)
        failure.airlock_error = error  # type: ignore[attr-defined]
    finally:
        sys.stdout = saved
    return buffer.getvalue(), failure


def run_session(
    code: str,
    fn_name: str | None,
    tests: list[dict[str, Any]],
    channel: Channel,
    *,
    keep_going: bool = False,
    flavour: str = "verl",
) -> None:
    """Build the module once, then run ``tests`` in order, reporting one message per step.

    Messages: {"op": "built", "ok", "error"?}, then per test {"op": "observed", "status", ...}.
    A ``BaseException`` other than ``Exception`` escapes ``run_test`` in the reference; it is
    reported as ``aborted`` and ends the session, as the reference's process would end. A runtime
    error ends it too, unless ``keep_going`` (ColossalAI's ``run_all_tests``, stdin mode). A test
    marked ``dry`` is not run: it only lets the build be reported when no test can run.
    """
    # The reference's caller silences the child's stdout and stderr and gives it an empty stdin.
    sys.stdin = open(os.devnull)  # noqa: SIM115 - process-lifetime streams
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    if flavour == APPS:
        fn_name = None  # its reshaping runs standard-input programs only
    # What patches standard input, bound before the guard and the program run, as the reference's
    # module binds it: nothing the program then does to sys.modules reaches the patching. The
    # worker loaded unittest.mock wherever the program may reach it or the open it patches
    # (``preloaded``); elsewhere the same patches go in without it.
    mock = sys.modules.get("unittest.mock") if fn_name is None else None
    if flavour == APPS:
        import faulthandler

        faulthandler.disable()
        os.environ["OMP_NUM_THREADS"] = "1"
        source = prelude_for(code, fn_name) + apps_script_as_function(code)
        import importlib.machinery
        import importlib.util

        spec = importlib.machinery.ModuleSpec(APPS_MODULE, None, origin="<generated_code>")
        module = importlib.util.module_from_spec(spec)
    else:
        apply_guard()
        source = prelude_for(code, fn_name) + (code if fn_name is not None else script_as_function(code))
        module = types.ModuleType("tmp_sol")
    try:
        # dont_inherit: this module's `from __future__ import annotations` must not turn the
        # program's annotations into strings (dataclasses then look for the unregistered module).
        exec(compile(source, PROGRAM_FILE, "exec", dont_inherit=True), module.__dict__)
        if flavour != APPS:
            sys.modules["tmp_sol"] = module
        target: Any = module.Solution() if fn_name is not None and "class Solution" in code else module
    except Exception as exc:  # noqa: BLE001 - a build failure is the reference's -2
        channel.send({"op": "built", "ok": False, "error": _error(exc)})
        return
    except BaseException as exc:  # noqa: BLE001 - escapes the reference's run_test
        channel.send({"op": "built", "ok": False, "aborted": True, "error": _error(exc)})
        return
    try:
        method = getattr(target, fn_name if fn_name is not None else "code")
    except Exception:  # noqa: BLE001 - the reference reports repr(sys.exc_info()) here
        error = {
            "type": "AttributeError",
            "message": repr(sys.exc_info()),
            "traceback": _traceback_text(),
        }
        channel.send({"op": "built", "ok": False, "error": error})
        return
    channel.send({"op": "built", "ok": True})
    for test in tests:
        if test.get("dry"):
            channel.send({"op": "observed", "status": "ok"})
            continue
        if not _run_test(method, test, channel, keep_going, flavour, fn_name is None, mock):
            return


def _run_test(
    method: Callable[..., Any],
    test: dict[str, Any],
    channel: Channel,
    keep_going: bool,
    flavour: str,
    stdin_session: bool,
    mock: types.ModuleType | None,
) -> bool:
    """Run one test and report it (one of standard input, ``mock`` patching ``open`` if given,
    or a call); False when the session must end."""
    if stdin_session:
        try:
            text, failure = _captured(method, test["stdin"], flavour, mock)
        except BaseException as exc:  # noqa: BLE001 - escapes run_test in the reference
            channel.send({"op": "observed", "status": "aborted", "error": _error(exc)})
            return False
        if failure is not None:
            channel.send({"op": "observed", "status": "runtime_error", "error": failure.airlock_error})  # type: ignore[attr-defined]
            return keep_going
        channel.send({"op": "observed", "status": "ok", "stdout": text})
        return True
    try:
        output = method(*codec.decode(test["args"]))
    except Exception as exc:  # noqa: BLE001 - a runtime error, -1 in the reference
        channel.send({"op": "observed", "status": "runtime_error", "error": _error(exc)})
        return False
    except BaseException as exc:  # noqa: BLE001 - SystemExit and friends escape run_test
        channel.send({"op": "observed", "status": "aborted", "error": _error(exc)})
        return False
    try:
        value = codec.encode(output)
    except codec.CodecError as exc:
        # The reference's json.dumps would have raised; the host knows what that means.
        error = {"type": "TypeError", "message": repr(TypeError(str(exc))), "traceback": ""}
        channel.send({"op": "observed", "status": "runtime_error", "error": error})
        return False
    channel.send({"op": "observed", "status": "ok", "value": value})
    return True
