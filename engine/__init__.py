"""Airlock: run untrusted, machine-written code in throwaway, locked-down containers and judge it."""

from ._engine import Engine, EngineStatistics, JobObserver
from ._errors import (
    EngineError,
    HarnessProtocolError,
    ImageBuildError,
    ImageError,
    ImageNotFound,
    NotJudged,
    RuntimeUnavailable,
    SandboxError,
    SandboxLimitReached,
    SandboxNotFound,
)
from ._limits import DEFAULT_LIMITS, Limits
from ._models import ErrorInfo, Language, Outcome, RunResult, Usage
from ._settings import Settings
from ._submission import (
    AssertTest,
    CallTest,
    Case,
    CaseResult,
    Checker,
    Interactor,
    RunTest,
    StdinTest,
    Submission,
    SubmissionResult,
    Subtask,
    SubtaskResult,
    Verdict,
)
from ._sync import SyncEngine, SyncProcess, SyncSandbox, SyncSessions, SyncVolumes, SyncWatcher
from ._version import __version__
from .judge._batches import Judge
from .judge._compare import OutputMatch
from .runtime._base import ContainerUsage
from .runtime._pool import PoolStatistics, WarmPool
from .sandboxes._interpreter import CellEnd, CellError, CellEvent, CellQuiet, CellResult, CellText, CodeContext
from .sandboxes._paused import SnapshotRecord
from .sandboxes._sandbox import Command, Entry, EntryType, Exit, Metrics, Output, Process, Sandbox, TerminalSize
from .sandboxes._sessions import Sessions
from .sandboxes._volumes import EntryStat, VolumeFull, VolumeLimitReached, VolumeNotFound, VolumeRecord, Volumes
from .sandboxes._watch import FileEvent, FileEventType, Watcher

__all__ = [
    "DEFAULT_LIMITS",
    "AssertTest",
    "CallTest",
    "Case",
    "CaseResult",
    "CellEnd",
    "CellError",
    "CellEvent",
    "CellQuiet",
    "CellResult",
    "CellText",
    "Checker",
    "CodeContext",
    "Command",
    "ContainerUsage",
    "Engine",
    "EngineError",
    "EngineStatistics",
    "Entry",
    "EntryStat",
    "EntryType",
    "ErrorInfo",
    "Exit",
    "FileEvent",
    "FileEventType",
    "HarnessProtocolError",
    "ImageBuildError",
    "ImageError",
    "ImageNotFound",
    "Interactor",
    "JobObserver",
    "Judge",
    "Language",
    "Limits",
    "Metrics",
    "NotJudged",
    "Outcome",
    "Output",
    "OutputMatch",
    "PoolStatistics",
    "Process",
    "RunResult",
    "RunTest",
    "RuntimeUnavailable",
    "Sandbox",
    "SandboxError",
    "SandboxLimitReached",
    "SandboxNotFound",
    "Sessions",
    "Settings",
    "SnapshotRecord",
    "StdinTest",
    "Submission",
    "SubmissionResult",
    "Subtask",
    "SubtaskResult",
    "SyncEngine",
    "SyncProcess",
    "SyncSandbox",
    "SyncSessions",
    "SyncVolumes",
    "SyncWatcher",
    "TerminalSize",
    "Usage",
    "Verdict",
    "VolumeFull",
    "VolumeLimitReached",
    "VolumeNotFound",
    "VolumeRecord",
    "Volumes",
    "WarmPool",
    "Watcher",
    "__version__",
]
