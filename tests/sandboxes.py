"""The one place a test chooses a runtime, an isolation tier or an OCI binary.

Optional kinds (gVisor, crun, the OCI runtime driven directly) exist only where
`scripts/setup` could install them; a test that takes its sandbox from here is skipped with
the reason where one is missing, never failed. `tests/unit/test_sandbox_selection.py` keeps
every other test module from naming an optional kind itself.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest
from dockerd import registered_runtimes

from engine import EngineError, Settings
from engine._settings import Isolation, RuntimeName
from engine.runtime import choose_oci_binary


class Sandbox(NamedTuple):
    runtime: RuntimeName
    isolation: Isolation
    oci_binary: str | None = None

    @property
    def id(self) -> str:
        return f"{self.runtime}-{self.oci_binary or self.isolation}"

    def cli_flags(self) -> list[str]:
        """The same sandbox chosen on ``airlock``'s command line."""
        binary = ["--oci-runtime", self.oci_binary] if self.oci_binary else []
        return ["--runtime", self.runtime, "--isolation", self.isolation, *binary]

    @contextlib.contextmanager
    def chosen_by_environment(self) -> Iterator[None]:
        """The same sandbox chosen by the engine's environment variables while inside, for the
        drop-ins, which make engines of their own."""
        binary = {"AIRLOCK_OCI_RUNTIME": self.oci_binary} if self.oci_binary else {}
        with pytest.MonkeyPatch.context() as patch:
            for name, value in {"AIRLOCK_RUNTIME": self.runtime, "AIRLOCK_ISOLATION": self.isolation, **binary}.items():
                patch.setenv(name, value)
            yield

    def settings(self, **overrides: Any) -> Settings:
        """Engine settings that choose this sandbox."""
        return Settings(runtime=self.runtime, isolation=self.isolation, oci_runtime=self.oci_binary, **overrides)

    def missing(self) -> str | None:
        """Why this machine cannot provide this sandbox, or None when it can."""
        if self.runtime == "docker":
            if self.isolation == "gvisor" and "runsc" not in _registered():
                return "gVisor is not registered with dockerd here (scripts/setup --with-gvisor adds it)"
            if self.oci_binary not in (None, *_registered()):
                return f"{self.oci_binary} is not registered with dockerd here (scripts/setup registers crun)"
            return None
        if os.geteuid() != 0:
            return "the OCI runtime needs root"
        try:
            choose_oci_binary(self.oci_binary)
        except EngineError as exc:
            return str(exc)
        return None

    def require(self) -> Sandbox:
        """This sandbox, or a skip that says why the machine lacks it."""
        reason = self.missing()
        if reason:
            pytest.skip(reason)
        return self


@functools.cache
def _registered() -> frozenset[str]:
    return frozenset(registered_runtimes())


# In the order both runtimes prefer them.
OCI_BINARIES = ("crun", "runc")
# The OCI runtime driven directly, on the binary it prefers, and on each.
OCI = Sandbox("oci", "runc")
OCI_SANDBOXES = [Sandbox("oci", "runc", binary) for binary in OCI_BINARIES]
# Every kind the attack suite covers: each runtime, isolation tier and OCI binary.
SANDBOXES = [
    *(Sandbox("docker", "runc", binary) for binary in OCI_BINARIES),
    Sandbox("docker", "gvisor"),
    *OCI_SANDBOXES,
]


def cheapest() -> Sandbox:
    """The sandbox that costs this machine least per job (the OCI runtime where it can run, about
    a third of Docker's CPU), for suites that compare what is judged, not how it is contained."""
    return OCI if OCI.missing() is None else Sandbox("docker", "runc")


# Long-lived sandboxes (sessions, `airlock serve`'s E2B) on each runtime: Docker's default binary
# for the runc tier (crun where dockerd has it), gVisor, and the OCI runtime on the binary it
# prefers. (The attack suite runs them on every kind.)
SESSION_SANDBOXES = [Sandbox("docker", "runc"), Sandbox("docker", "gvisor"), OCI]


def ids(sandboxes: list[Sandbox]) -> list[str]:
    return [sandbox.id for sandbox in sandboxes]
