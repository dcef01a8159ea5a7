"""The sandboxes every attack runs in: one per runtime, isolation tier and OCI binary."""

from __future__ import annotations

from typing import NamedTuple


class Sandbox(NamedTuple):
    runtime: str
    isolation: str
    oci_binary: str | None = None

    def cli_flags(self) -> list[str]:
        """The same sandbox chosen on ``airlock``'s command line."""
        binary = ["--oci-runtime", self.oci_binary] if self.oci_binary else []
        return ["--runtime", self.runtime, "--isolation", self.isolation, *binary]


SANDBOXES = [
    Sandbox("docker", "runc", "crun"),
    Sandbox("docker", "runc", "runc"),
    Sandbox("docker", "gvisor"),
    Sandbox("oci", "runc", "crun"),
    Sandbox("oci", "runc", "runc"),
]
IDS = [f"{s.runtime}-{s.oci_binary or s.isolation}" for s in SANDBOXES]
