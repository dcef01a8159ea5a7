"""Airlock: run untrusted, machine-written code in throwaway, locked-down containers and judge it."""

from ._engine import Engine
from ._errors import (
    EngineError,
    HarnessProtocolError,
    ImageBuildError,
    ImageError,
    ImageNotFound,
    RuntimeUnavailable,
    SandboxError,
)
from ._limits import DEFAULT_LIMITS, Limits
from ._models import ErrorInfo, Language, Outcome, RunResult
from ._sandbox import Sandbox
from ._settings import Settings
from ._submission import (
    AssertTest,
    CallTest,
    RunTest,
    StdinTest,
    Submission,
    SubmissionResult,
    Test,
    TestResult,
    Verdict,
)
from ._sync import SyncEngine
from ._version import __version__

__all__ = [
    "DEFAULT_LIMITS",
    "AssertTest",
    "CallTest",
    "Engine",
    "EngineError",
    "ErrorInfo",
    "HarnessProtocolError",
    "ImageBuildError",
    "ImageError",
    "ImageNotFound",
    "Language",
    "Limits",
    "Outcome",
    "RunResult",
    "RunTest",
    "RuntimeUnavailable",
    "Sandbox",
    "SandboxError",
    "Settings",
    "StdinTest",
    "Submission",
    "SubmissionResult",
    "SyncEngine",
    "Test",
    "TestResult",
    "Verdict",
    "__version__",
]
