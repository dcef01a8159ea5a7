"""Wire constants shared by the host and the in-image harness (standard library only).

The host writes one request document (JSON, one line) to the container's stdin; it then
closes stdin, unless the request is interactive (see ``conversation``: stdin then carries each
test's live input). The harness answers on the container's stdout with newline-terminated
JSON frames, in this order:

    {"type": "hello", "protocol": PROTOCOL_VERSION, "tests": N}
    {"type": "data", "index": i, "data": ...}   interactive only: what test i's program wrote
    {"type": "test", "index": 0, ...}     one per test that ran, indices 0, 1, 2, ...
    {"type": "done", "tests": k}          k <= N (fewer when the request asked to stop early)

with {"type": "alive"} between them whenever HEARTBEAT_S pass without another frame, so that
the host can tell a harness that waits on a long test from a sandbox that stopped running it.

or, if the request itself was unusable, a single {"type": "error", "message": ...}.
Nothing the submission runs can write to that channel: the harness is PID 1 and not
dumpable, and the submission's own stdout and stderr go to files the harness reads.

Between the harness and its worker (the untrusted process that runs the submission) the
messages are length-prefixed JSON on a Unix socket, so that a reader never reads ahead
into a message meant for a forked child.
"""

from __future__ import annotations

PROTOCOL_VERSION = 6

# Modes a request can ask for. "script" runs the program with a standard input;
# "call" calls one function per test; "assert" runs trusted test code against the program;
# "prime" executes the way the reference run_test does (one process for all tests).
MODES = ("script", "call", "assert", "prime")
# How the program runs: "python" loads it once in a worker and forks per test (every mode; or,
# when the request's "shared_process" is true, runs the tests of script, call and assert modes
# one after another in the worker itself);
# "process" compiles it once and starts one process per test (script mode, any language);
# "node" starts one Node process per test (call and assert modes of JavaScript).
RUNNERS = ("python", "process", "node")

# The name of a Python program's source in its folder.
PROGRAM_FILE = "main.py"

# Statuses the harness observes for a test. The host turns them into verdicts.
OK = "ok"
RUNTIME_ERROR = "runtime_error"
COMPILE_ERROR = "compile_error"
TIMEOUT = "timeout"
MEMORY_LIMIT = "memory_limit"
OUTPUT_LIMIT = "output_limit"
ASSERTION_FAILED = "assertion_failed"
# Prime mode only: the run ended without returning (an escaping BaseException, a dead process).
ABORTED = "aborted"
STATUSES = (OK, RUNTIME_ERROR, COMPILE_ERROR, TIMEOUT, MEMORY_LIMIT, OUTPUT_LIMIT, ASSERTION_FAILED, ABORTED)

# The wall-clock backstop of a step gives back the time a busy machine kept its program waiting
# (for a CPU, for the disk), up to this many times the backstop itself: six jobs per core beside a busy
# process per core stretch a program's wall time about twelvefold here (scripts/bench load).
STARVED_ALLOWANCE = 10
# A harness that waits writes at least one frame this often (see the frame order above).
HEARTBEAT_S = 1.0
# Upper bound for one request document; the host refuses larger jobs before sending.
MAX_REQUEST_BYTES = 256 * 1024 * 1024
# Upper bound for one harness<->worker message (arguments, return values, errors).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# UTF-8 size of each error message and traceback kept in a report.
MAX_ERROR_BYTES = 8192
# Every text field of a frame is bounded by its UTF-8 size; JSON escaping (ensure_ascii)
# writes at most this many bytes per byte of UTF-8, which bounds a frame's size.
FRAME_ESCAPE_FACTOR = 6


def clip_text(text: str, max_bytes: int, *, keep_end: bool = False) -> str:
    """``text`` cut to at most ``max_bytes`` bytes of UTF-8 (lone surrogates count as three)."""
    if len(text) * 4 <= max_bytes:
        return text
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= max_bytes:
        return text
    kept = data[len(data) - max_bytes :] if keep_end else data[:max_bytes]
    # A character cut in two is dropped.
    return kept.decode("utf-8", errors="ignore")
