"""Container runtimes behind one interface."""

from ._background import BackgroundTasks
from ._base import (
    ContainerRef,
    ContainerSpec,
    ContainerUsage,
    Exchange,
    LineSink,
    MoreInput,
    OutputStream,
    Runtime,
    RuntimeInfo,
    Spawned,
)
from ._capture import Lines
from ._docker import DockerRuntime, choose_docker_runtime
from ._oci import OCI_BINARIES, OciRuntime, choose_oci_binary
from ._uids import UidLease, UidPool

__all__ = [
    "OCI_BINARIES",
    "BackgroundTasks",
    "ContainerRef",
    "ContainerSpec",
    "ContainerUsage",
    "DockerRuntime",
    "Exchange",
    "LineSink",
    "Lines",
    "MoreInput",
    "OciRuntime",
    "OutputStream",
    "Runtime",
    "RuntimeInfo",
    "Spawned",
    "UidLease",
    "UidPool",
    "choose_docker_runtime",
    "choose_oci_binary",
]
