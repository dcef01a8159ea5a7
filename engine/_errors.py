"""Exceptions raised by the engine.

Operational failures share one root, so ``except EngineError`` catches everything that can
go wrong around a submission without hiding programming mistakes::

    EngineError
    ├── RuntimeUnavailable      the container engine does not answer
    ├── ImageError
    │   ├── ImageNotFound       an image the job needs is not built
    │   └── ImageBuildError     building an image failed
    ├── SandboxError            creating, running or removing a container failed
    │   └── NotJudged           so a program was not judged (a drop-in whose result has no place to say so)
    ├── SandboxNotFound         no live sandbox has that id
    ├── ContextNotFound         the sandbox has no code context of that id
    ├── SandboxLimitReached     as many sandboxes are alive as the engine allows
    └── HarnessProtocolError    the in-container harness answered outside the protocol

A submission that fails its tests is not an error: that is a result. Bad arguments (an
unknown language, negative limits, malformed tests) raise ``ValueError`` subclasses, most of
them pydantic's ``ValidationError``, which names the offending field.
"""

from __future__ import annotations

__all__ = [
    "ContextNotFound",
    "EngineError",
    "HarnessProtocolError",
    "ImageBuildError",
    "ImageError",
    "ImageNotFound",
    "NotJudged",
    "RuntimeUnavailable",
    "SandboxError",
    "SandboxLimitReached",
    "SandboxNotFound",
]


class EngineError(Exception):
    """Root of every operational failure the engine reports."""


class RuntimeUnavailable(EngineError):
    """The container engine (the Docker daemon, or ``runc``) cannot be reached or used."""


class ImageError(EngineError):
    """Something is wrong with a sandbox image."""


class ImageNotFound(ImageError):
    """The image a job needs does not exist locally; ``airlock images build`` makes it."""


class ImageBuildError(ImageError):
    """An image build failed; the message carries the tail of the build log."""


class SandboxError(EngineError):
    """A container could not be created, started, driven or removed."""


class NotJudged(SandboxError):
    """The sandbox failed around a program (the container engine, a lost container, a batch's
    deadline), so nothing is known about it: judging it again may succeed. Raised where a result
    cannot say so itself (a float reward), instead of a score that would blame the program."""


class SandboxNotFound(EngineError):
    """No live sandbox has that id: it was killed, it expired, or it never existed."""


class ContextNotFound(EngineError):
    """The sandbox has no code-interpreter context of that id."""


class SandboxLimitReached(EngineError):
    """As many sandboxes are alive as the engine allows (``Settings.max_sandboxes``), or as many
    watchers are open in a sandbox as it allows."""


class HarnessProtocolError(EngineError):
    """The harness's report was missing, malformed, or inconsistent with the request."""
