"""Harness report lines as tests write them: a test's frame, and the report's first and last lines."""

from __future__ import annotations

import json

from engine.harness.protocol import PROTOCOL_VERSION


def frame(index: int, **overrides: object) -> bytes:
    body = {
        "type": "test",
        "index": index,
        "status": "ok",
        "exit_code": 0,
        "signal": None,
        "stdout": "",
        "stderr": "",
        "stdout_truncated": False,
        "stderr_truncated": False,
        "usage": {"wall_time_s": 0.01, "cpu_time_s": 0.01, "peak_memory_kb": 1000},
        "error": None,
    }
    body.update(overrides)
    return json.dumps(body).encode()


HELLO = json.dumps({"type": "hello", "protocol": PROTOCOL_VERSION, "tests": 2}).encode()
DONE = json.dumps({"type": "done", "tests": 2}).encode()
