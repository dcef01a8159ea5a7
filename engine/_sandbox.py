"""A long-lived sandbox: one hardened container kept alive to run commands and hold files."""

from __future__ import annotations

from collections.abc import Mapping

from ._limits import Limits
from ._models import Outcome, RunResult
from .runtime import ContainerRef, Exchange, Runtime

__all__ = ["Sandbox"]

# The only writable place in a sandbox: the root filesystem is read-only.
SCRATCH_DIR = "/tmp"


class Sandbox:
    """Commands and files inside one container. Created by :meth:`Engine.sandbox`.

    Its root filesystem is read-only, so files live under ``/tmp`` (RAM, ``Limits.tmpfs_mb``).
    Files move through the command channel rather than Docker's archive API, which can
    neither write to a read-only root nor into a tmpfs.
    """

    def __init__(self, runtime: Runtime, container: ContainerRef, limits: Limits) -> None:
        self._runtime = runtime
        self._container = container
        self.limits = limits

    @property
    def id(self) -> str:
        return self._container.id

    async def exec(
        self,
        argv: list[str],
        *,
        stdin: bytes = b"",
        time_s: float | None = None,
        workdir: str = SCRATCH_DIR,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Run ``argv`` to completion (or to ``time_s``, by default ``Limits.wall_time_s``)."""
        exchange = await self._runtime.exec(
            self._container,
            argv,
            stdin=stdin,
            deadline_s=time_s or self.limits.wall_time_s,
            output_limit=self.limits.output_bytes,
            workdir=workdir,
            env=env,
        )
        return _command_result(exchange)

    async def write_file(self, path: str, data: bytes) -> None:
        result = await self.exec(["sh", "-c", 'cat > "$1"', "sh", path], stdin=data)
        if not result.ok:
            raise OSError(f"cannot write {path}: {result.stderr.strip() or result.outcome}")

    async def read_file(self, path: str) -> bytes:
        exchange = await self._runtime.exec(
            self._container, ["cat", path], deadline_s=self.limits.wall_time_s, output_limit=self.limits.output_bytes
        )
        if exchange.exit_code != 0:
            raise FileNotFoundError(f"cannot read {path}: {exchange.stderr.decode(errors='replace').strip()}")
        if exchange.stdout_truncated:
            raise OSError(f"{path} is larger than the output limit of {self.limits.output_bytes} bytes")
        return exchange.stdout


def _command_result(exchange: Exchange) -> RunResult:
    if exchange.timed_out:
        outcome = Outcome.TIMEOUT
    elif exchange.stdout_truncated or exchange.stderr_truncated:
        outcome = Outcome.OUTPUT_LIMIT
    elif exchange.exit_code == 0:
        outcome = Outcome.OK
    else:
        outcome = Outcome.RUNTIME_ERROR
    return RunResult(
        outcome=outcome,
        exit_code=exchange.exit_code,
        stdout=exchange.stdout.decode("utf-8", errors="replace"),
        stderr=exchange.stderr.decode("utf-8", errors="replace"),
        stdout_truncated=exchange.stdout_truncated,
        stderr_truncated=exchange.stderr_truncated,
        wall_time_s=exchange.wall_time_s,
    )
