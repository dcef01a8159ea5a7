"""The one engine the reward-kit drop-ins share in a process (see ``engine.compat._shared``)."""

from __future__ import annotations

from ... import Limits
from .._shared import SharedEngine

__all__ = ["close", "configure", "shared"]

shared = SharedEngine(Limits(memory_mb=1024, tmpfs_mb=128, wall_time_s=30))
configure = shared.configure
close = shared.close
