"""The host's side of the harness protocol (``engine.harness.protocol``): the request it sends,
and strict reading of the report it gets back. Public through ``engine.lowlevel``.

The report arrives as lines on the container's stdout. Anything outside the protocol (a
wrong version, a frame out of order, an unknown field, a count that does not add up, bytes
after the end) makes the whole report invalid: the engine fails closed, never guesses.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import enum
import json
import os
import threading
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._errors import HarnessProtocolError
from .._limits import Limits
from .._models import ErrorInfo, Usage
from ..harness import protocol as wire

__all__ = [
    "HarnessFeed",
    "HarnessRequest",
    "HarnessRun",
    "Observation",
    "PrimeOptions",
    "ProcessCommands",
    "ReportReader",
    "RunEnd",
    "Status",
    "limit_fields",
]


class Status(enum.StrEnum):
    """What the harness observed of one test; the host turns it into a verdict."""

    OK = wire.OK
    RUNTIME_ERROR = wire.RUNTIME_ERROR
    COMPILE_ERROR = wire.COMPILE_ERROR
    TIMEOUT = wire.TIMEOUT
    MEMORY_LIMIT = wire.MEMORY_LIMIT
    OUTPUT_LIMIT = wire.OUTPUT_LIMIT
    ASSERTION_FAILED = wire.ASSERTION_FAILED
    ABORTED = wire.ABORTED
    """The reference-compatible mode only: the run ended without returning."""


class Observation(BaseModel):
    """What the harness saw while one test ran. Judging it is the host's job."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    type: Literal["test"]
    index: int
    status: Status = Field(strict=False)  # a JSON string, read as the enum
    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    usage: Usage
    error: ErrorInfo | None
    value: Any = None
    """The returned value in the codec's encoding (``decode_value`` reads it), when there is one."""

    @property
    def has_value(self) -> bool:
        """Whether the harness reported a return value (a returned ``None`` counts)."""
        return "value" in self.model_fields_set


class _Hello(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    type: Literal["hello"]
    protocol: int
    tests: int


class _Done(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    type: Literal["done"]
    tests: int


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


class HarnessFeed:
    """An interactive request's live input (``engine.harness.conversation``): each test's stdin
    as it arrives, for the runtime to write to the container after the request.

    Safe to feed from any thread (a runtime reads reports in a worker thread); ``fileno`` is
    readable whenever there is something to take, or once the feed has ended.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffer = bytearray()
        self._ended = False
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def data(self, index: int, chunk: bytes) -> None:
        """Bytes for test ``index``'s stdin."""
        self._put({"index": index, "data": base64.b64encode(chunk).decode("ascii")})

    def end(self, index: int) -> None:
        """Test ``index``'s stdin ends."""
        self._put({"index": index, "end": True})

    def close(self) -> None:
        """Nothing more: every test's stdin ends."""
        with self._lock:
            self._ended = True
        self._wake()

    def _put(self, message: dict[str, Any]) -> None:
        with self._lock:
            if self._ended:
                return
            self._buffer += json.dumps(message).encode() + b"\n"
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # already awake (the pipe is full), or released
            os.write(self._wake_write, b"!")

    def fileno(self) -> int:
        return self._wake_read

    def take(self) -> bytes | None:
        """What is there to write now (perhaps nothing); None once the feed has ended and all of
        it was taken."""
        with contextlib.suppress(OSError):
            while os.read(self._wake_read, 4096):
                pass
        with self._lock:
            taken = bytes(self._buffer)
            self._buffer.clear()
            return None if not taken and self._ended else taken

    def release(self) -> None:
        """Let go of the descriptors (once no runtime waits on them)."""
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)


class ReportReader:
    """Consumes report lines as they stream; usable directly as a runtime's line sink.

    It tells the runtime to stop reading once the report is complete, or when it is broken;
    never because of what an observation says (judging waits for the whole report).

    In an interactive run, ``peer`` hears what each test's process wrote (its data frames) and
    when each test ended, as the other side's stdin; the test's ``stdout`` is what it wrote,
    up to ``kept_bytes``.
    """

    def __init__(self, expected_tests: int, peer: HarnessFeed | None = None, kept_bytes: int = 0) -> None:
        self.expected_tests = expected_tests
        self.peer = peer
        self._kept_bytes = kept_bytes
        self._transcript = bytearray()
        self.observations: list[Observation] = []
        # When each observation arrived (``time.monotonic()``): which side of an interaction ended first.
        self.reported_at: list[float] = []
        self.finished = False
        self.error: str | None = None
        # Whether the harness has read the request (its first frame).
        self.greeted = False
        # When the harness was last heard from (``time.monotonic()``): it writes a frame at
        # least every ``HEARTBEAT_S`` while it runs.
        self.last_heard = time.monotonic()

    def __call__(self, line: bytes) -> bool:
        self.last_heard = time.monotonic()
        try:
            return self._feed(line)
        except (ValueError, ValidationError, RecursionError) as exc:
            self.error = self.error or _short(f"malformed report line: {exc}")
            return True

    def _feed(self, line: bytes) -> bool:
        if self.error is not None or self.finished:
            self.error = self.error or "the report continued after its end"
            return True
        frame = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
        kind = frame.get("type") if isinstance(frame, dict) else None
        if not self.greeted:
            if kind == "error":
                self.error = _short(f"the harness refused the request: {frame.get('message')}")
                return True
            hello = _Hello.model_validate(frame)
            if hello.protocol != wire.PROTOCOL_VERSION or hello.tests != self.expected_tests:
                self.error = (
                    f"harness speaks protocol {hello.protocol} for {hello.tests} tests; expected "
                    f"protocol {wire.PROTOCOL_VERSION} for {self.expected_tests}"
                )
                return True
            self.greeted = True
            return False
        if kind == "done":
            done = _Done.model_validate(frame)
            if done.tests != len(self.observations):
                self.error = f"the report ends after {done.tests} tests but carried {len(self.observations)}"
                return True
            self.finished = True
            return True  # nothing more to read: the runtime need not wait for the container
        if kind == "alive":
            return False
        if kind == "data" and self.peer is not None:
            return self._data(frame)
        observation = Observation.model_validate(frame)
        if observation.index != len(self.observations) or observation.index >= self.expected_tests:
            self.error = f"test frame {observation.index} arrived out of order"
            return True
        # Stamped before the peer hears of it: whatever the peer does on its input's end comes later.
        self.reported_at.append(time.monotonic())
        if self.peer is not None:
            self.peer.end(observation.index)
            stdout = self._transcript[: self._kept_bytes].decode("utf-8", errors="replace")
            observation = observation.model_copy(update={"stdout": stdout})
            self._transcript.clear()
        self.observations.append(observation)
        return False

    def _data(self, frame: dict[str, Any]) -> bool:
        index, data = frame.get("index"), frame.get("data")
        if set(frame) != {"type", "index", "data"} or index != len(self.observations) or not isinstance(data, str):
            self.error = f"a data frame for test {index} arrived out of order or malformed"
            return True
        try:
            chunk = base64.b64decode(data, validate=True)
        except binascii.Error:
            self.error = "a data frame does not hold base64"
            return True
        self.peer.data(index, chunk)  # type: ignore[union-attr]
        if len(self._transcript) <= self._kept_bytes:
            self._transcript += chunk
        return False

    def check(self, trailing: bytes) -> None:
        """Raise unless the report was complete and well formed; ``trailing`` is unterminated output."""
        if self.error is None and trailing.strip():
            self.error = "the report ends in an incomplete line"
        if self.error is not None:
            raise HarnessProtocolError(self.error)


def _short(text: str) -> str:
    return wire.clip_text(text, wire.MAX_ERROR_BYTES)


class ProcessCommands(BaseModel):
    """How the process runner runs a program: its source file's name, the command that compiles
    it in the program's folder (None: nothing to compile), and the command that runs it. In the
    commands ``{dir}`` stands for the program's folder and ``{source}`` for the source's path."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    compile: tuple[str, ...] | None = None
    run: tuple[str, ...]


class PrimeOptions(BaseModel):
    """The reference ``run_test``'s session rules (the ``prime`` mode only)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_limit_s: float | None = Field(None, description="for a whole session; None: no limit but each step's")
    isolate: bool = Field(False, description="each test in a session of its own")
    continue_after_error: bool = Field(False, description="a runtime error does not end the session")
    flavour: Literal["verl", "reward_kit_apps"] = Field(
        "verl", description="whose run_test: verl's prime_code, or reward-kit's APPS variant (stdin tests only)"
    )


class HarnessRequest(BaseModel):
    """The request document the harness reads from stdin (``engine.harness.protocol``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    protocol: int = wire.PROTOCOL_VERSION
    runner: Literal["python", "process", "node"] = "python"
    mode: Literal["script", "call", "assert", "prime"]
    code: str
    entry: str | None = None
    tests: list[dict[str, Any]]
    time_limit_s: float = Field(description="each test's CPU seconds")
    wall_limit_s: float = Field(description="each test's wall-clock backstop")
    compile_time_limit_s: float = Field(description="CPU seconds to compile or load the program")
    compile_wall_limit_s: float = Field(description="the wall-clock backstop of compiling or loading")
    output_limit_bytes: int
    cpus: float | None = Field(None, description="the sandbox's CPU quota in cores, which no CPU reading may pass")
    stop_on_first_failure: bool = Field(
        False, description="the harness may stop at a failure the program caused itself (never at a wrong answer)"
    )
    shared_process: bool = Field(
        False, description="Python's script, call and assert tests run one after another in one process"
    )
    process: ProcessCommands | None = None
    prime: PrimeOptions | None = None
    interactive: bool = Field(False, description="script tests whose stdin and stdout are a live exchange")
    program_files: dict[str, str] | None = Field(
        None, description="more files in the program's folder, written there before it is compiled or loaded"
    )


def limit_fields(limits: Limits) -> dict[str, Any]:
    """The fields of a harness request that ``limits`` sets."""
    return {
        "time_limit_s": limits.time_s,
        "wall_limit_s": limits.wall_time_s,
        "compile_time_limit_s": limits.compile_time_s,
        "compile_wall_limit_s": limits.compile_wall_time_s,
        "output_limit_bytes": limits.output_bytes,
        "cpus": limits.cpus,
    }


class RunEnd(enum.StrEnum):
    """Why a harness run ended."""

    COMPLETE = "complete"
    MEMORY_LIMIT = "memory_limit"
    TIMEOUT = "timeout"
    SANDBOX_ERROR = "sandbox_error"


class HarnessRun(BaseModel):
    """The observations a harness reported, and how its container ended."""

    model_config = ConfigDict(frozen=True)

    observations: list[Observation]
    end: RunEnd
    error: ErrorInfo | None = None
    # Whether the failure was the sandbox's (not the program's) and another try could succeed.
    retryable: bool = False
