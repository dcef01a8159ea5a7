"""Container runtimes behind one interface."""

from ._base import ContainerRef, ContainerSpec, Exchange, LineSink, OutputStream, Runtime, RuntimeInfo, Spawned
from ._docker import DockerRuntime
from ._oci import OciRuntime
from ._uids import UidLease, UidPool

__all__ = [
    "ContainerRef",
    "ContainerSpec",
    "DockerRuntime",
    "Exchange",
    "LineSink",
    "OciRuntime",
    "OutputStream",
    "Runtime",
    "RuntimeInfo",
    "Spawned",
    "UidLease",
    "UidPool",
]
