"""envd's request messages as the E2B SDKs send them (Connect's JSON codec of envd's protobuf
messages): each one a model, so that a field of the wrong shape is an ``invalid_argument`` that
names it, never a 500. As protobuf's JSON reader does, a field is accepted under its JSON name
(``watcherId``) or its own (``watcher_id``), an integer also as a string of digits, and unknown
fields are ignored."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from ..sandboxes._sandbox import MAX_TERMINAL_SIDE, TerminalSize
from ._connect import ConnectError

__all__ = [
    "InputRequest",
    "ListDirRequest",
    "MoveRequest",
    "PathRequest",
    "ProcessConfig",
    "ProcessInput",
    "ProcessSelector",
    "Pty",
    "SelectRequest",
    "SignalRequest",
    "StartRequest",
    "StreamInputMessage",
    "UpdateRequest",
    "WatchRequest",
    "WatcherRequest",
    "parsed",
]

Message = TypeVar("Message", bound=BaseModel)
# ListDir's deepest walk.
MAX_DEPTH = 64


def _no_nul(text: str) -> str:
    if "\x00" in text:
        raise ValueError("must not hold a NUL character (no command, path or variable can)")
    return text


# Text that becomes part of a command line, a path or an environment.
Text = Annotated[str, AfterValidator(_no_nul)]
Name = Annotated[str, AfterValidator(_no_nul), Field(min_length=1)]


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore", alias_generator=to_camel, populate_by_name=True, frozen=True)


class ProcessSelector(_Message):
    """A running process, by pid or by the tag it was started with."""

    pid: int | None = Field(None, ge=0, lt=1 << 32)
    tag: Text | None = None


class ProcessConfig(_Message):
    cmd: Name = Field(description="the command to run")
    args: list[Text] = Field(default_factory=list)
    envs: dict[Annotated[Name, Field(pattern=r"^[^=]*$")], Text] = Field(default_factory=dict)
    cwd: Text | None = None


class PtySize(_Message):
    rows: int = Field(ge=1, le=MAX_TERMINAL_SIDE)
    cols: int = Field(ge=1, le=MAX_TERMINAL_SIDE)


class Pty(_Message):
    size: PtySize

    def terminal(self) -> TerminalSize:
        return TerminalSize(rows=self.size.rows, cols=self.size.cols)


class StartRequest(_Message):
    process: ProcessConfig
    pty: Pty | None = None
    tag: Text | None = None
    stdin: bool = False


class SelectRequest(_Message):
    process: ProcessSelector = Field(default_factory=ProcessSelector)


class SignalRequest(SelectRequest):
    signal: str | int = "SIGNAL_SIGKILL"


class ProcessInput(_Message):
    stdin: str | None = Field(None, description="base64")
    pty: str | None = Field(None, description="base64: typed at the process's terminal")


class InputRequest(SelectRequest):
    input: ProcessInput = Field(default_factory=ProcessInput)


class UpdateRequest(SelectRequest):
    pty: Pty | None = None


class StreamInputData(_Message):
    input: ProcessInput = Field(default_factory=ProcessInput)


class StreamInputMessage(_Message):
    """One message of ``StreamInput``: ``start`` first, then ``data`` or ``keepalive``."""

    start: SelectRequest | None = None
    data: StreamInputData | None = None
    keepalive: dict[str, Any] | None = None


class PathRequest(_Message):
    path: Name


class ListDirRequest(PathRequest):
    depth: int = Field(0, ge=0, le=MAX_DEPTH, description="0 as 1, protobuf's default")


class MoveRequest(_Message):
    source: Name
    destination: Name


class WatchRequest(PathRequest):
    recursive: bool = False
    include_entry: bool = False


class WatcherRequest(_Message):
    watcher_id: str = ""


def parsed(model: type[Message], message: dict[str, Any]) -> Message:
    """``message`` as ``model``; Connect's ``invalid_argument``, naming the field, if it is not one."""
    try:
        return model.model_validate(message)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "message"
        raise ConnectError("invalid_argument", f"{where}: {first['msg']}") from None
