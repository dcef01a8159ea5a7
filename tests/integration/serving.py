"""`airlock serve` started by a test as a user starts it, on a free loopback port."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import tempfile
import time
from types import TracebackType

import httpx
from paused import fresh_paused_dir

API_KEY = "e2b_" + "a1" * 20


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Server:
    """`airlock serve` in a process of its own."""

    def __init__(self, isolation: str, *extra: str, api_key: str | None = API_KEY) -> None:
        self.isolation = isolation
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "engine", "serve", "--port", str(self.port)]
        command += ["--api-key", api_key] if api_key else []
        command += [] if "--paused-dir" in extra else ["--paused-dir", str(fresh_paused_dir())]
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - read back when the server is stopped
        self.process = subprocess.Popen(
            [*command, "--isolation", isolation, *extra], stdout=self.log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"airlock serve exited with {self.process.returncode}: {self.output()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("airlock serve did not answer within 60 s")

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> str:
        """Stop it as Ctrl-C does; what it printed, which must not be a traceback."""
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        output = self.output()
        self.log.close()
        return output

    def __enter__(self) -> Server:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        """Stopped; when the block went through, its log must hold no traceback."""
        output = self.stop()
        if kind is None:
            assert "Traceback" not in output, output
