"""A drop-in for the ``e2b_code_interpreter`` package, with no server and no E2B account::

    from engine.compat.e2b_code_interpreter import Sandbox     # was: from e2b_code_interpreter import Sandbox

    with Sandbox.create() as sandbox:
        execution = sandbox.run_code("x = 41; x + 1")
        print(execution.text)                                 # 42

Every sandbox is an Airlock sandbox of this process's engine (made on first use; ``configure``
gives it one of yours). Today's API (``run_code``, ``files``, ``commands``, code contexts) and the
older one (``CodeInterpreter``, ``notebook.exec_cell``) are both here, returning objects with
the SDK's attribute names. Not offered: templates, pause and resume, custom ports, the
``root`` user, pseudo-terminals.
"""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from .. import (
    CellEnd,
    CellError,
    CellResult,
    CellText,
    Entry,
    FileEventType,
    Limits,
    SyncEngine,
    SyncSandbox,
    SyncWatcher,
)
from ..e2b import ENTRY_KINDS, result_fields
from ._shared import SharedEngine

__all__ = [
    "CodeInterpreter",
    "CommandExitException",
    "CommandResult",
    "Context",
    "EntryInfo",
    "Execution",
    "ExecutionError",
    "FilesystemEvent",
    "FilesystemEventType",
    "Logs",
    "OutputMessage",
    "Result",
    "Sandbox",
    "TimeoutException",
    "WatchHandle",
    "close",
    "configure",
]

DEFAULT_TIMEOUT_S = 300
_shared = SharedEngine(Limits(memory_mb=1024, tmpfs_mb=256, wall_time_s=60))


def configure(engine: SyncEngine | None) -> None:
    """Make sandboxes with ``engine`` (``None``: one made on first use)."""
    _shared.configure(engine)


def close() -> None:
    """Close the engine this module made (and with it every sandbox it still has)."""
    _shared.close()


class TimeoutException(Exception):
    """A cell or command ran past its timeout."""


@dataclass
class OutputMessage:
    line: str
    timestamp: int = 0
    error: bool = False

    def __str__(self) -> str:
        return self.line


@dataclass
class Logs:
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)


@dataclass
class ExecutionError:
    name: str
    value: str
    traceback: str


@dataclass
class Result:
    """One output of a cell: its value (``is_main_result``), a ``display()``, or a figure."""

    is_main_result: bool = False
    text: str | None = None
    html: str | None = None
    markdown: str | None = None
    svg: str | None = None
    png: str | None = None
    jpeg: str | None = None
    pdf: str | None = None
    latex: str | None = None
    json: dict[str, Any] | None = None
    javascript: str | None = None
    data: dict[str, Any] | None = None
    chart: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_cell(cls, event: CellResult) -> Result:
        fields, extra = result_fields(event)
        return cls(is_main_result=event.is_main_result, extra=extra, **fields)

    def formats(self) -> list[str]:
        named = [f.name for f in dataclasses.fields(self) if f.name not in ("is_main_result", "extra")]
        return [name for name in named if getattr(self, name)] + list(self.extra)

    def __str__(self) -> str:
        return self.text or ""


@dataclass
class Execution:
    results: list[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    error: ExecutionError | None = None
    execution_count: int | None = None

    @property
    def text(self) -> str | None:
        return next((r.text for r in self.results if r.is_main_result), None)


@dataclass
class Context:
    id: str
    language: str
    cwd: str


@dataclass
class CommandResult:
    stdout: str
    stderr: str
    exit_code: int
    error: str | None = None


class CommandExitException(CommandResult, Exception):
    """A command that exited with a non-zero code."""

    def __init__(self, stdout: str, stderr: str, exit_code: int, error: str | None = None) -> None:
        CommandResult.__init__(self, stdout, stderr, exit_code, error)
        Exception.__init__(self, f"Command exited with code {exit_code} and error:\n{stderr}")


@dataclass
class EntryInfo:
    name: str
    type: Literal["file", "dir"] | None
    path: str
    size: int
    mode: int
    permissions: str
    owner: str
    group: str
    symlink_target: str | None = None

    @classmethod
    def of(cls, entry: Entry) -> EntryInfo:
        kind = ENTRY_KINDS.get(entry.type)
        return cls(
            entry.name,
            kind,
            entry.path,
            entry.size,
            entry.mode,
            entry.permissions,
            entry.owner,
            entry.group,
            entry.symlink_target,
        )


@dataclass
class WriteInfo:
    name: str
    path: str
    type: str = "file"


# The SDK's five event types, under its name and with its values.
FilesystemEventType = FileEventType


@dataclass
class FilesystemEvent:
    name: str
    type: FilesystemEventType


class WatchHandle:
    """What ``files.watch_dir`` returns: the events since the last call, until stopped."""

    def __init__(self, watcher: SyncWatcher) -> None:
        self._watcher = watcher
        self._stopped = False

    def get_new_events(self, **_: Any) -> list[FilesystemEvent]:
        if self._stopped:
            raise RuntimeError("The watcher is already stopped")
        return [FilesystemEvent(event.name, event.type) for event in self._watcher.drain()]

    def stop(self, **_: Any) -> None:
        self._watcher.stop()
        self._stopped = True


class Files:
    """``sandbox.files``."""

    def __init__(self, sandbox: SyncSandbox) -> None:
        self._sandbox = sandbox

    def read(self, path: str, format: Literal["text", "bytes"] = "text", **_: Any) -> str | bytearray:
        data = self._sandbox.read_file(path)
        return bytearray(data) if format == "bytes" else data.decode("utf-8", errors="replace")

    def write(self, path: str, data: str | bytes | Iterable[bytes], **_: Any) -> WriteInfo:
        payload = data.encode() if isinstance(data, str) else data
        entry = self._sandbox.write_file(path, payload)
        return WriteInfo(entry.name, entry.path)

    def list(self, path: str, depth: int = 1, **_: Any) -> list[EntryInfo]:
        return [EntryInfo.of(entry) for entry in self._sandbox.list_dir(path, depth)]

    def exists(self, path: str, **_: Any) -> bool:
        try:
            self._sandbox.stat(path)
        except FileNotFoundError:
            return False
        return True

    def get_info(self, path: str, **_: Any) -> EntryInfo:
        return EntryInfo.of(self._sandbox.stat(path))

    def make_dir(self, path: str, **_: Any) -> bool:
        try:
            self._sandbox.make_dir(path)
        except FileExistsError:
            return False
        return True

    def remove(self, path: str, **_: Any) -> None:
        self._sandbox.remove(path)

    def rename(self, old_path: str, new_path: str, **_: Any) -> EntryInfo:
        return EntryInfo.of(self._sandbox.move(old_path, new_path))

    def watch_dir(self, path: str, recursive: bool = False, **_: Any) -> WatchHandle:
        return WatchHandle(self._sandbox.watch(path, recursive=recursive))


class Commands:
    """``sandbox.commands``: each command runs as ``bash -l -c``, as E2B's do."""

    def __init__(self, sandbox: SyncSandbox) -> None:
        self._sandbox = sandbox

    def run(
        self,
        cmd: str,
        envs: Mapping[str, str] | None = None,
        cwd: str | None = None,
        on_stdout: Callable[[str], None] | None = None,
        on_stderr: Callable[[str], None] | None = None,
        timeout: float | None = 60,
        user: str | None = None,
        **_: Any,
    ) -> CommandResult:
        if user not in (None, "user"):
            raise PermissionError(f"only the user 'user' exists in an Airlock sandbox, not {user!r}")
        process = self._sandbox.start(["/bin/bash", "-l", "-c", cmd], cwd=cwd, env=envs, time_s=timeout or None)
        streams: dict[str, list[str]] = {"stdout": [], "stderr": []}
        for chunk in process.output():
            text = chunk.data.decode("utf-8", errors="replace")
            streams[chunk.stream].append(text)
            callback = on_stdout if chunk.stream == "stdout" else on_stderr
            if callback is not None:
                callback(text)
        ended = process.wait()
        stdout, stderr = "".join(streams["stdout"]), "".join(streams["stderr"])
        if ended.timed_out:
            raise TimeoutException(f"the command ran past its {timeout} s and was killed")
        code = -1 if ended.signal is not None or ended.exit_code is None else ended.exit_code
        if code != 0:
            raise CommandExitException(stdout, stderr, code, ended.status)
        return CommandResult(stdout, stderr, 0)

    def kill(self, pid: int) -> bool:
        process = next((p for p in self._sandbox.running() if p.pid == pid), None)
        return process is not None and process.signal(signal.SIGKILL)


class Sandbox:
    """An Airlock sandbox with the E2B code-interpreter SDK's API."""

    def __init__(
        self,
        template: str | None = None,
        timeout: int = DEFAULT_TIMEOUT_S,
        metadata: Mapping[str, str] | None = None,
        envs: Mapping[str, str] | None = None,
        **_: Any,
    ) -> None:
        self._sandbox = _shared.get().create_sandbox(timeout_s=timeout, env=envs, metadata=metadata)
        self.files = Files(self._sandbox)
        self.commands = Commands(self._sandbox)
        self._alive = True

    @classmethod
    def create(
        cls,
        template: str | None = None,
        timeout: int = DEFAULT_TIMEOUT_S,
        metadata: Mapping[str, str] | None = None,
        envs: Mapping[str, str] | None = None,
        **options: Any,
    ) -> Self:
        return cls(template, timeout, metadata, envs, **options)

    @property
    def sandbox_id(self) -> str:
        return self._sandbox.id

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill()

    def kill(self) -> bool:
        if not self._alive:
            return False
        self._alive = False
        return _shared.get().sandboxes.kill(self._sandbox.id)

    def is_running(self) -> bool:
        return self._alive and self._sandbox.seconds_left > 0

    def set_timeout(self, timeout: int) -> None:
        self._sandbox.set_timeout(timeout)

    def run_code(
        self,
        code: str,
        language: str | None = None,
        context: Context | None = None,
        on_stdout: Callable[[OutputMessage], Any] | None = None,
        on_stderr: Callable[[OutputMessage], Any] | None = None,
        on_result: Callable[[Result], Any] | None = None,
        on_error: Callable[[ExecutionError], Any] | None = None,
        envs: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **_: Any,
    ) -> Execution:
        if language and context:
            raise ValueError("name a context or a language, not both")
        execution = Execution()
        cell = self._sandbox.run_code(
            code,
            context_id=context.id if context else None,
            language=language or "python",
            env=envs,
            time_s=timeout or DEFAULT_TIMEOUT_S,
        )
        for event in cell:
            if isinstance(event, CellText):
                message = OutputMessage(event.text, error=event.type == "stderr")
                getattr(execution.logs, event.type).append(event.text)
                callback = on_stdout if event.type == "stdout" else on_stderr
                if callback is not None:
                    callback(message)
            elif isinstance(event, CellResult):
                result = Result.from_cell(event)
                execution.results.append(result)
                if on_result is not None:
                    on_result(result)
            elif isinstance(event, CellError):
                if event.name == "TimeoutError":
                    raise TimeoutException(event.value)
                execution.error = ExecutionError(event.name, event.value, event.traceback)
                if on_error is not None:
                    on_error(execution.error)
            elif isinstance(event, CellEnd):
                execution.execution_count = event.execution_count
        return execution

    def create_code_context(self, cwd: str | None = None, language: str | None = None, **_: Any) -> Context:
        created = self._sandbox.create_context(language or "python", cwd)
        return Context(created.id, created.language, created.cwd)

    def list_code_contexts(self) -> list[Context]:
        return [Context(c.id, c.language, c.cwd) for c in self._sandbox.contexts.values()]

    def restart_code_context(self, context: Context | str) -> None:
        self._sandbox.restart_context(context if isinstance(context, str) else context.id)

    def remove_code_context(self, context: Context | str) -> None:
        self._sandbox.remove_context(context if isinstance(context, str) else context.id)


class Notebook:
    """The older API's ``sandbox.notebook``."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox

    def exec_cell(
        self,
        code: str,
        on_stdout: Callable[[OutputMessage], Any] | None = None,
        on_stderr: Callable[[OutputMessage], Any] | None = None,
        on_result: Callable[[Result], Any] | None = None,
        timeout: float | None = None,
        **_: Any,
    ) -> Execution:
        return self._sandbox.run_code(
            code, on_stdout=on_stdout, on_stderr=on_stderr, on_result=on_result, timeout=timeout
        )


class CodeInterpreter(Sandbox):
    """The older API: ``with CodeInterpreter() as sandbox: sandbox.notebook.exec_cell(code)``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.notebook = Notebook(self)

    def close(self) -> None:
        self.kill()
