"""The low-level layer: the harness's request, what it observes, and how a run ended.

Most users judge submissions (``Engine.judge``) and never see this. Layers that judge by rules
of their own (``engine.compat``: a reference's comparison and control flow, replayed on the
host) build a :class:`HarnessRequest`, run it with ``Engine.run_harness`` (or
``SyncEngine.run_harness``) in a fresh hardened container, and read the :class:`Observation`
of each test: the program's output, its returned value (``decode_value``), its status.
Arguments travel in the same typed encoding (``encode_value``). Nothing
here is judged, and nothing a layer concludes reaches the running container.

Also here: the runtime seam (``Runtime`` and what it passes, ``BackgroundTasks`` that sandboxes
and pools start their work in, for runtimes of one's own; see
``engine.testing``), a language's ``toolchain``, the reference's comparison (``prime_*``)
that ``comparator="prime"`` applies, and how code with no place for an engine in its signatures
is handed this process's (``on_process_engine``, ``use_process_engine``).
"""

from ._languages import Toolchain, toolchain
from ._limits import backstop_s
from ._sync import on_process_engine, use_process_engine
from .harness.codec import CodecError, Typed
from .harness.codec import decode as decode_value
from .harness.codec import encode as encode_value
from .judge._prime_compare import normalise_prime_expected, prime_call, prime_json_text, prime_stdout
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
from .runtime import BackgroundTasks, ContainerRef, ContainerSpec, Runtime, RuntimeInfo, Spawned

__all__ = [
    "BackgroundTasks",
    "CodecError",
    "ContainerRef",
    "ContainerSpec",
    "HarnessRequest",
    "HarnessRun",
    "Observation",
    "PrimeOptions",
    "ProcessCommands",
    "RunEnd",
    "Runtime",
    "RuntimeInfo",
    "Spawned",
    "Status",
    "Toolchain",
    "Typed",
    "backstop_s",
    "decode_value",
    "encode_value",
    "limit_fields",
    "normalise_prime_expected",
    "on_process_engine",
    "prime_call",
    "prime_json_text",
    "prime_stdout",
    "toolchain",
    "use_process_engine",
]
