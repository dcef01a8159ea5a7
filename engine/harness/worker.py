"""The untrusted half of the harness: the process that runs the submission.

The harness starts it as a fresh interpreter (so it holds none of the harness's memory, and
therefore none of the test code) with a control socket. It loads the submission once, then
forks one child per test, so every test starts from the same loaded state and imports are
paid once per submission. A submission whose tests share a process (``in_place``) runs each
test in the worker itself instead, one after another, as the unsafe references run them: no
fork, no child, and whatever a test leaves in the process the next one finds. Nothing it
reports is trusted: the harness keeps the time, kills, and reads the outputs from its own file
descriptors; the host judges the values.

Messages (see ``protocol``), harness -> worker:
    {"op": "load", "mode", "code", "path", "entry", "workdir", "in_place"?}
    {"op": "test", "cwd", "cpu_fence_s", "args"?} + stdin, stdout, stderr   one fork per test (or none)
    {"op": "prime", "cwd", "cpu_fence_s", "fn_name", "tests"} + the same    one fork per session
    {"op": "call", "name", "args", "kwargs", "target"?} / {"op": "end"}    assert mode, to the child
worker -> harness:
    {"op": "loaded", "ok", "error"?, "globals"?, "modules"?}
    {"op": "ready"} / {"op": "reply", "ok", "value"?, "target"?, ...}      from the child, assert mode
    {"op": "result", "ok", "value"? | "error"?}                            from the child, call mode
    {"op": "built"} / {"op": "observed"}                                   from the child, prime mode
    {"op": "exit", "exit_code", "signal", "peak_memory_kb", "cpu_time_s"}  after the child ended (or the
                                                                           test, in place)
"""

from __future__ import annotations

import atexit
import builtins
import io
import os
import resource
import sys
import types

from . import codec
from ._lean import socket, suppress
from ._typing import TYPE_CHECKING
from .channel import Channel
from .lockdown import fence_cpu, make_undumpable
from .protocol import MAX_ERROR_BYTES, clip_text

if TYPE_CHECKING:
    from typing import Any, NoReturn


# Heavy libraries worth importing once in the worker when the program imports them; the
# per-test children then find them already loaded. Only libraries without import-time
# output qualify: an import that printed would print once instead of once per test.
PRELOADABLE = frozenset(
    {
        "numpy",
        "scipy",
        "pandas",
        "sympy",
        "networkx",
        "sortedcontainers",
        "heapq",
        "collections",
        "itertools",
        "functools",
        "math",
        "bisect",
        "re",
        "json",
        "fractions",
        "decimal",
        "string",
        "random",
        "statistics",
        "typing",
        "dataclasses",
        "copy",
        "operator",
        "array",
        "datetime",
    }
)


def describe_error(exc: BaseException, path: str | None = None) -> dict[str, str]:
    """Type, message and a traceback that starts at the program's own frames."""
    import traceback  # only when there is an error: the worker starts once per submission

    tb = exc.__traceback__
    if path is not None:
        frame = tb
        while frame is not None and frame.tb_frame.f_code.co_filename != path:
            frame = frame.tb_next
        tb = frame if frame is not None else tb
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    return {
        "type": type(exc).__name__,
        "message": clip_text(str(exc), MAX_ERROR_BYTES),
        "traceback": clip_text(text, MAX_ERROR_BYTES, keep_end=True),
    }


def exit_status_code(exc: SystemExit) -> int:
    """The interpreter's own mapping from ``SystemExit`` to a process exit status."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


class Program:
    """The submission, compiled and (for call and assert modes) imported once."""

    def __init__(self, message: dict[str, Any]) -> None:
        self.mode: str = message["mode"]
        self.source: str = message["code"]
        self.path: str = message["path"]
        self.entry: str | None = message.get("entry")
        self.in_place = bool(message.get("in_place"))
        self.code: types.CodeType | None = None
        self.module: types.ModuleType | None = None

    def load(self) -> dict[str, Any]:
        if self.mode == "prime":
            from . import worker_prime as prime

            # The reference builds the program anew in every run; only its imports are shared.
            for name in prime.preloaded(self.source, self.entry):
                with suppress(Exception):
                    __import__(name)
            return {"op": "loaded", "ok": True}
        try:
            self.code = compile(self.source, self.path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            return {"op": "loaded", "ok": False, "stage": "compile", "error": describe_error(exc)}
        if self.mode == "script":
            self._preload()
            return {"op": "loaded", "ok": True}
        module = types.ModuleType("solution")
        module.__file__ = self.path
        sys.modules["solution"] = module
        try:
            exec(self.code, module.__dict__)
        except BaseException as exc:  # noqa: BLE001 - any failure while importing is the program's
            return {"op": "loaded", "ok": False, "stage": "import", "error": describe_error(exc, self.path)}
        finally:
            _flush_std_streams()
        self.module = module
        if self.mode == "call" and self._resolve_target() is None:
            error = {
                "type": "NameError",
                "message": f"no function or Solution method named {self.entry!r}",
                "traceback": "",
            }
            return {"op": "loaded", "ok": False, "stage": "entry", "error": error}
        names = sorted(k for k, v in module.__dict__.items() if callable(v) and not k.startswith("__"))
        # The modules the program imported, by name: a test may use them as if it had too.
        modules = {
            k: v.__name__
            for k, v in module.__dict__.items()
            if isinstance(v, types.ModuleType) and isinstance(v.__name__, str) and not k.startswith("__")
        }
        return {"op": "loaded", "ok": True, "globals": names, "modules": modules}

    def _preload(self) -> None:
        # The parser's own classes, not the ast module, which imports enum and contextlib: 5 ms
        # of every script's worker, more than the rest of its start.
        import _ast

        try:
            tree = compile(self.source, self.path, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
        except (SyntaxError, ValueError):
            return
        wanted: set[str] = set()
        for node in tree.body if isinstance(tree, _ast.Module) else ():
            if isinstance(node, _ast.Import):
                wanted.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, _ast.ImportFrom) and node.module and node.level == 0:
                wanted.add(node.module.split(".")[0])
        for name in sorted(wanted & PRELOADABLE):
            try:
                __import__(name)
            except Exception:  # noqa: BLE001, S112 - the test run reports the real import error
                continue

    def _resolve_target(self) -> Any:
        assert self.module is not None
        function = self.module.__dict__.get(self.entry or "")
        if callable(function) and not isinstance(function, type):
            return function
        solution = self.module.__dict__.get("Solution")
        if isinstance(solution, type) and callable(getattr(solution, self.entry or "", None)):
            return solution
        return None

    def callable_for(self, name: str, *, classes: bool = False) -> Any:
        """The function a test calls: a module-level function (or, with ``classes``, a class to
        instantiate) or a method of a fresh ``Solution()``."""
        assert self.module is not None
        target = self.module.__dict__.get(name)
        if callable(target) and (classes or not isinstance(target, type)):
            return target
        solution = self.module.__dict__.get("Solution")
        if isinstance(solution, type) and callable(getattr(solution, name, None)):
            return getattr(solution(), name)
        raise NameError(f"no function or Solution method named {name!r}")


def _flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        # A program may have closed or replaced them.
        with suppress(Exception):
            stream.flush()


def install_test_streams() -> None:
    """Make the ``sys`` streams every test gets, on descriptors 0-2, the worker's own. Done once,
    after the program loaded and before any test, so each child only points the descriptors at
    its own files (it saves a third of a fork's cost), and no child frees the streams they replace
    (that touched, and so copied from the fork, some 30 pages in every test); the worker never
    uses them itself, so they are unused, with empty buffers, in every child."""
    streams = (
        io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8"),
        io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8"),
        io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        ),
    )
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams  # type: ignore[misc]


def _point_std_fds(fds: list[int]) -> None:
    """Point fds 0-2, and so the ``sys`` streams, at this test's stdin, stdout and stderr."""
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)


def run_script(program: Program, arguments: list[str]) -> tuple[int, types.ModuleType]:
    """Run the program as ``python3 main.py ARGUMENTS`` would, in a fresh ``__main__``; its exit
    status, and that ``__main__``."""
    assert program.code is not None
    main = types.ModuleType("__main__")
    main.__file__ = program.path
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    sys.argv = [program.path, *arguments]
    # As the interpreter does for a script: the modules beside it can be imported.
    folder = os.path.dirname(program.path)
    if sys.path[:1] != [folder]:
        sys.path.insert(0, folder)
    try:
        exec(program.code, main.__dict__)
        status = 0
    except SystemExit as exc:
        status = exit_status_code(exc)
    except BaseException as exc:  # noqa: BLE001 - reported the way the interpreter reports it
        sys.stderr.write(describe_error(exc, program.path)["traceback"])
        status = 1
    return status, main


def end_like_the_interpreter(status: int, main: types.ModuleType) -> int:
    """What interpreter shutdown does that a program can observe, without tearing down every
    module; the exit status it would end with.

    A full shutdown of this process (which holds the harness's modules too) costs more than the
    test itself; what a program can notice is that non-daemon threads finish, ``atexit``
    handlers run, and every file object it still holds is flushed (dropping ``__main__``'s names
    releases them). Threads are joined one by one, not by ``threading._shutdown``, which a
    process whose tests share it could not survive: it marks the main thread ended.
    """
    threading = sys.modules.get("threading")
    if threading is not None:
        with suppress(Exception):
            current = threading.current_thread()
            # Again until none is left: a thread may start others before it ends.
            while others := [t for t in threading.enumerate() if t is not current and not t.daemon]:
                for thread in others:
                    thread.join()
    atexit._run_exitfuncs()
    main.__dict__.clear()
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - as the interpreter: a failed flush of stdout is status 120
        status = status or 120
    _flush_std_streams()
    return status


def answer(
    program: Program,
    name: str,
    args: Any,
    kwargs: Any,
    objects: codec.Objects = codec.PLAIN,
    target: Any = None,
) -> dict[str, Any]:
    """Call the program's ``name`` (or ``target``'s method ``name``) with decoded arguments; the
    value, or why there is none."""
    try:
        if target is None:
            function = program.callable_for(name, classes=objects is not codec.PLAIN)
        else:
            function = getattr(objects.decode("$handle", target, 0), name)
        value = function(*codec.decode(args, objects=objects), **codec.decode(kwargs, objects=objects))
        _flush_std_streams()
        reply = {"ok": True, "value": codec.encode(value, objects)}
        if target is not None:
            reply["target"] = codec.encode(objects.decode("$handle", target, 0), objects)
        return reply
    except codec.CodecError as exc:
        return {"ok": False, "error": {"type": "UnjudgeableValue", "message": str(exc), "traceback": ""}}
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: exiting is not an answer
        _flush_std_streams()
        return {"ok": False, "error": describe_error(exc, program.path)}


def call_once(program: Program, channel: Channel, message: dict[str, Any]) -> None:
    """Call mode: one call, one result."""
    channel.send({"op": "result", **answer(program, program.entry or "", message["args"], codec.encode({}))})


# Objects whose attributes are code or the interpreter's, not data: they cross as bare handles.
_STATELESS = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)
# How many objects one test may hand out: a structure of millions would cost the trusted side
# more to hold than the test is worth.
MAX_HANDLES = 100_000


class ProgramObjects(codec.Objects):
    """The program's side of the assert boundary. An object of the test's classes arrives as its
    state and is rebuilt from the program's class of the same name (a data set's setup code
    defines them for both sides); the program's own objects stay here, and cross as a handle
    with their state, which the test's side only reads and compares."""

    rebuilds_values = True

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module
        self.handles: list[Any] = []
        self._handle_of: dict[int, int] = {}

    def encode(self, value: Any, depth: int) -> Any:
        # One object, one handle: a method call's answer refreshes the test's handle to it.
        handle = self._handle_of.get(id(value))
        if handle is None:
            if len(self.handles) >= MAX_HANDLES:
                raise codec.CodecError(f"the program's answers hold more than {MAX_HANDLES} objects")
            handle = self._handle_of[id(value)] = len(self.handles)
            self.handles.append(value)  # kept, so that its id stays its own
        cls = type(value)
        state = None
        if not isinstance(value, _STATELESS):
            try:
                state = codec.encode(_state_of(value), self, depth)
            except (codec.CodecError, TypeError):
                state = None
        name = cls.__qualname__ if isinstance(cls.__qualname__, str) else "object"
        return {"$object": [name, handle, state]}

    def decode(self, tag: str, body: Any, depth: int) -> Any:
        if tag == "$handle":
            if type(body) is not int or not 0 <= body < len(self.handles):
                raise codec.CodecError(f"no object with handle {body!r}")
            return self.handles[body]
        if type(body) is not list or len(body) != 3 or type(body[0]) is not str:
            raise codec.CodecError("malformed $object")
        name, _, state = body
        cls = self.module.__dict__.get(name)
        if not isinstance(cls, type):
            raise codec.CodecError(f"the test passes a {name}, and the program defines no class {name!r}")
        make: Any = cls.__new__
        rebuilt = make(cls)
        for key, item in (codec.decode(state, objects=self, _depth=depth) or {}).items():
            object.__setattr__(rebuilt, key, item)
        return rebuilt

    def resolve_class(self, name: str) -> Any:
        module_name = name.partition(":")[0]
        with suppress(Exception):
            __import__(module_name)
        return codec.imported_class(name, sys.modules)


def _state_of(value: Any) -> dict[str, Any]:
    """An object's attributes: its ``__dict__`` and the slots it has filled."""
    try:
        state = dict(object.__getattribute__(value, "__dict__"))
    except (AttributeError, TypeError):
        state = {}
    for cls in type(value).__mro__:
        for slot in cls.__dict__.get("__slots__", ()):
            if isinstance(slot, str) and slot not in ("__dict__", "__weakref__"):
                with suppress(AttributeError):
                    state[slot] = object.__getattribute__(value, slot)
    return state


def serve_calls(program: Program, channel: Channel) -> None:
    """Assert mode: answer the harness's calls until it ends the session."""
    assert program.module is not None
    objects = ProgramObjects(program.module)
    channel.send({"op": "ready"})
    while True:
        message = channel.recv()
        if message["op"] != "call":
            return
        reply = answer(program, message["name"], message["args"], message["kwargs"], objects, message.get("target"))
        channel.send({"op": "reply", **reply})


def _enter_test(message: dict[str, Any], fds: list[int], *, in_place: bool) -> None:
    """Give this process the test's standard streams, working directory and CPU fence."""
    _point_std_fds(fds)
    if in_place:
        # Fresh streams: what one test left unread in its input's buffer must not be the next one's.
        install_test_streams()
    fence = message.get("cpu_fence_s")
    if type(fence) is int and fence > 0:
        fence_cpu(fence, in_place=in_place)
    os.chdir(message["cwd"])


def run_child(
    program: Program,
    channel: Channel,
    message: dict[str, Any],
    fds: list[int],
) -> NoReturn:
    """Body of the per-test child; it never returns."""
    _enter_test(message, fds, in_place=False)
    if program.mode == "prime":
        from . import worker_prime as prime

        prime.run_session(
            program.source,
            message.get("fn_name"),
            message["tests"],
            channel,
            keep_going=bool(message.get("continue_after_error")),
            flavour=str(message.get("flavour", "verl")),
        )
        os._exit(0)
    if program.mode == "script":
        channel.close()
        os._exit(end_like_the_interpreter(*run_script(program, list(message.get("argv", ())))))
    if program.mode == "call":
        call_once(program, channel, message)
    else:
        serve_calls(program, channel)
    _flush_std_streams()
    os._exit(0)


def run_in_place(program: Program, channel: Channel, message: dict[str, Any], fds: list[int]) -> None:
    """One test in this process, as ``run_child`` runs it in a child; then its end, reported as a
    child's would be. A program that closed the channel ends the process with its status instead:
    the harness then reads that as the test's exit."""
    _reap_children()
    _enter_test(message, fds, in_place=True)
    status = 0
    if program.mode == "script":
        status = end_like_the_interpreter(*run_script(program, list(message.get("argv", ()))))
    elif program.mode == "call":
        call_once(program, channel, message)
    else:
        serve_calls(program, channel)
    _flush_std_streams()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    exit = {"op": "exit", "exit_code": status, "signal": None, "peak_memory_kb": usage.ru_maxrss}
    try:
        channel.send(exit)
    except OSError:
        os._exit(status)


def _reap_children() -> None:
    """Reap the children earlier tests left of this process, which the harness has killed since:
    their parent alone can, and each would hold a slot of the pids limit, in sight of this test."""
    with suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def report_exit(channel: Channel, pid: int) -> None:
    _, status, usage = os.wait4(pid, 0)
    channel.send(
        {
            "op": "exit",
            "exit_code": os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "peak_memory_kb": usage.ru_maxrss,
            "cpu_time_s": round(usage.ru_utime + usage.ru_stime, 6),
        }
    )


def serve(control_fd: int) -> None:
    """Worker main loop: load once, then run each test, in a child forked for it (children never
    return here) or, for a program whose tests share a process, here."""
    channel = Channel(socket.socket(fileno=control_fd))
    load = channel.recv()
    os.chdir(load["workdir"])
    program = Program(load)
    channel.send(program.load())
    install_test_streams()
    while True:
        try:
            message = channel.recv()
        except EOFError:
            return
        fds = channel.fds
        if message["op"] not in ("test", "prime") or len(fds) != 3:
            return
        if program.in_place:
            run_in_place(program, channel, message, fds)
            continue
        _flush_std_streams()
        pid = os.fork()
        if pid == 0:
            run_child(program, channel, message, fds)
        for fd in fds:
            os.close(fd)
        report_exit(channel, pid)


def main(control_fd: int, harness_path: str) -> None:
    # Each test is a child of this process, with the same uid: dumpable, it could be written to
    # through /proc/<ppid>/mem by one test, changing what every later test starts from.
    make_undumpable()
    # The submission should not import the harness by accident of sys.path.
    if harness_path in sys.path:
        sys.path.remove(harness_path)
    serve(control_fd)
