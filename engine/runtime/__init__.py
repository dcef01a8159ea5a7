"""Container runtimes behind one interface."""

from ._base import ContainerRef, ContainerSpec, Exchange, LineSink, Runtime
from ._docker import DockerRuntime

__all__ = ["ContainerRef", "ContainerSpec", "DockerRuntime", "Exchange", "LineSink", "Runtime"]
