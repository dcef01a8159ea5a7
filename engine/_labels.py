"""Ownership labels on everything the engine creates, and the test for "left over"."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping

import psutil

from ._version import __version__

__all__ = ["LABEL_PREFIX", "MANAGED", "Owner", "is_leftover"]

LABEL_PREFIX = "io.airlock."
MANAGED = f"{LABEL_PREFIX}managed"
OWNER = f"{LABEL_PREFIX}owner"
SESSION = f"{LABEL_PREFIX}session"
VERSION = f"{LABEL_PREFIX}version"
PURPOSE = f"{LABEL_PREFIX}purpose"


class Owner:
    """Identifies one engine instance: this host, this process (pid plus start time), a session id."""

    def __init__(self) -> None:
        process = psutil.Process(os.getpid())
        self.host = socket.gethostname()
        self.token = f"{self.host}:{process.pid}:{process.create_time():.3f}"
        self.session = uuid.uuid4().hex

    def labels(self, purpose: str) -> dict[str, str]:
        return {
            MANAGED: "true",
            OWNER: self.token,
            SESSION: self.session,
            VERSION: __version__,
            PURPOSE: purpose,
        }


def is_leftover(labels: Mapping[str, str]) -> bool:
    """True when the engine process that created a container on this host no longer exists.

    Containers owned by a live engine (another CLI run, a server) are never leftovers; nor are
    containers created from another host, whose owners this host cannot see.
    """
    host, _, rest = labels.get(OWNER, "").partition(":")
    pid_text, _, started_text = rest.partition(":")
    if host != socket.gethostname():
        return False
    try:
        pid, started = int(pid_text), float(started_text)
    except ValueError:
        return True
    try:
        return bool(abs(psutil.Process(pid).create_time() - started) > 0.01)
    except psutil.NoSuchProcess:
        return True
