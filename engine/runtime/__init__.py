"""Container runtimes behind one interface."""

from ._base import ContainerRef, ContainerSpec, Exchange, LineSink, Runtime, RuntimeInfo
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
    "Runtime",
    "RuntimeInfo",
    "UidLease",
    "UidPool",
]
