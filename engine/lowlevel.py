"""The low-level layer: the harness's request, what it observes, and how a run ended.

Most users judge submissions (``Engine.judge``) and never see this. Layers that judge by rules
of their own (``engine.compat``: a reference's comparison and control flow, replayed on the
host) build a :class:`HarnessRequest`, run it with ``Engine.run_harness`` (or
``SyncEngine.run_harness``) in a fresh hardened container, and read the :class:`Observation`
of each test: the program's output, its returned value (``decode_value``), its status.
Arguments travel in the same typed encoding (``encode_value``). Nothing
here is judged, and nothing a layer concludes reaches the running container.
"""

from ._limits import backstop_s
from .harness.codec import CodecError, Typed
from .harness.codec import decode as decode_value
from .harness.codec import encode as encode_value
from .judge._protocol import (
    HarnessRequest,
    HarnessRun,
    Observation,
    PrimeOptions,
    ProcessCommands,
    RunEnd,
    Status,
    limit_fields,
)

__all__ = [
    "CodecError",
    "HarnessRequest",
    "HarnessRun",
    "Observation",
    "PrimeOptions",
    "ProcessCommands",
    "RunEnd",
    "Status",
    "Typed",
    "backstop_s",
    "decode_value",
    "encode_value",
    "limit_fields",
]
