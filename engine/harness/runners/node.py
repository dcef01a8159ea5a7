"""The Node runner: call and assert tests of a JavaScript program (standard library only).

Each test starts a fresh Node process as the program (``node/program.js``), which loads the
program as a script and calls its functions with plain values; nothing it reports is trusted
beyond being the program's own return value or exception.

- call: the process gets the arguments, calls the entry once and answers with the value; the
  host compares it with the expected one, which never enters the sandbox.
- assert: the trusted test code runs in a second Node process (``node/tests.js``), started from
  a copy of Node its user may execute but not read, so that the kernel makes it not dumpable:
  the program cannot read the expected answers from its memory or descriptors, nor write into
  them. It calls the program over a socket of its own and reports to the harness over another;
  a test passes only on that report, so a program that kills or stops it fails.

The program's folder is kept between tests and checked as the process runner checks it.
"""

from __future__ import annotations

import contextlib
import os
import time

from .._lean import socket
from .._typing import TYPE_CHECKING
from ..channel import Channel, ChannelClosed, ChannelError, ChannelTimeout, encode_message
from ..processes import as_program
from ..protocol import ASSERTION_FAILED, COMPILE_ERROR, OK, RUNTIME_ERROR
from ..supervisor import Abort, Outcome, clean_error
from ..workspace import memory_file
from .process import ProcessRunner

if TYPE_CHECKING:
    from typing import Any

    from ..supervisor import CaseIO, Supervisor

NODE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "node")
# Node, executable but not readable by the sandbox's users (the image makes it).
SEALED_NODE = "/opt/airlock/node-sealed"
# JavaScript numbers hold integers exactly up to here; larger ones travel as the codec's $int.
SAFE_INTEGER = 2**53 - 1
_REPORTED = {OK, ASSERTION_FAILED, RUNTIME_ERROR, COMPILE_ERROR}


def node_integers(data: Any) -> Any:
    """Encoded values with every integer JavaScript cannot hold exactly as an ``$int`` tag."""
    if isinstance(data, list):
        return [node_integers(item) for item in data]
    if isinstance(data, dict):
        return {key: node_integers(value) for key, value in data.items()}
    if type(data) is int and abs(data) > SAFE_INTEGER:
        return {"$int": hex(data)}
    return data


class NodeRunner(ProcessRunner):
    """Call and assert tests of a JavaScript program, a fresh Node process per test."""

    def __init__(self, request: dict[str, Any], supervisor: Supervisor) -> None:
        program = os.path.join(NODE_DIR, "program.js")
        super().__init__(request, supervisor, {"source": "main.js", "run": ["node", program, "{source}"]})

    def run_test(self, test: dict[str, Any], io: CaseIO) -> Outcome:
        if self.request["mode"] == "call":
            ours, theirs = socket.socketpair()
            request = {"op": "call", "entry": self.request["entry"], "args": node_integers(test["args"])}
            with contextlib.closing(ours):
                program = self._start_program(request, io, theirs)
                return self._call_outcome(Channel(ours), program)
        return self._assert_outcome(test, io)

    def _start_program(self, request: dict[str, Any], io: CaseIO, channel: socket.socket) -> int:
        """Start the program's process with ``request`` (in memory: its own arguments, nothing
        secret) and its end of ``channel``, which only it then holds."""
        requested = memory_file("request", encode_message(request))
        try:
            argv = as_program(self._expand(self.run_argv))
            return self.spawn(argv, (*io.fds, requested, channel.fileno()), cwd=self.supervisor.workspace.workdir)
        finally:
            os.close(requested)
            channel.close()

    def _receive(self, channel: Channel, who: str) -> dict[str, Any] | None:
        """The next message on ``channel`` within the clock; None if ``who`` closed it first."""
        clock = self.supervisor.clock
        clock.wait(channel.fileno())
        try:
            message = channel.recv(deadline=clock.deadline)
        except ChannelTimeout:
            raise clock.timeout() from None
        except ChannelClosed:
            return None
        except ChannelError as exc:
            raise Abort(RUNTIME_ERROR, f"{who} broke the harness protocol: {exc}") from None
        finally:
            for fd in channel.fds:  # never accept descriptors from the sandbox's side
                os.close(fd)
            channel.fds = []
        return message

    def _call_outcome(self, channel: Channel, program: int) -> Outcome:
        result = self._receive(channel, "the program")
        exit = self.wait(program)
        if result is None or result.get("op") != "result":
            error = {"type": "NoResult", "message": f"the function did not return ({exit.describe()})", "traceback": ""}
            return Outcome(RUNTIME_ERROR, error, exit=exit)
        if result.get("ok"):
            outcome = self.value_outcome(result.get("value"))
        elif result.get("stage") in ("compile", "entry"):
            # A program that does not parse, or lacks the function, fails every test alike.
            self.load_failure = outcome = Outcome(COMPILE_ERROR, clean_error(result.get("error")))
        else:
            outcome = Outcome(RUNTIME_ERROR, clean_error(result.get("error")))
        outcome.exit = exit
        return outcome

    def _assert_outcome(self, test: dict[str, Any], io: CaseIO) -> Outcome:
        """Start the test process, hand it the test code, and only then the program's process: the
        test code travels over a socket (no file of it, which /proc could open again) before
        the program exists. The test process's outputs go nowhere, for the same reason."""
        tests_channel, tests_end = socket.socketpair()
        program_channel, program_end = socket.socketpair()
        request = {
            "code": str(test["code"]),
            "prelude": str(test.get("prelude") or ""),
            "entry": self.request.get("entry"),
        }
        devnull = os.open(os.devnull, os.O_RDWR)
        try:
            argv = [SEALED_NODE, os.path.join(NODE_DIR, "tests.js")]
            fds = (devnull, devnull, devnull, program_channel.fileno(), tests_end.fileno())
            tests = self.spawn(argv, fds, cwd=NODE_DIR)
            # The trusted test code's time is not the program's.
            self.supervisor.clock.meter.trust(tests)
            # Only the test process may hold these, so that its end is seen when it ends.
            program_channel.close()
            tests_end.close()
            self._send(tests_channel, {"op": "test", **request})
            program = self._start_program({"op": "serve"}, io, program_end)
            report = self._receive(Channel(tests_channel), "the test process")
            tests_exit = self.wait(tests)
            self.supervisor.clock.meter.trust(tests, tests_exit.cpu_time_s or 0.0)
            program_exit = self.wait(program)
        finally:
            os.close(devnull)
            for sock in (tests_channel, tests_end, program_channel, program_end):
                sock.close()
        if report is None or report.get("op") != "done" or report.get("status") not in _REPORTED:
            message = (
                f"the test process ended without a report ({tests_exit.describe()}): only the program could stop it"
            )
            return Outcome(
                RUNTIME_ERROR, {"type": "TestProcessLost", "message": message, "traceback": ""}, exit=program_exit
            )
        status = str(report["status"])
        if status == OK:
            return Outcome(OK, exit=program_exit)
        error = clean_error(report.get("error"))
        if status == COMPILE_ERROR:
            self.load_failure = Outcome(COMPILE_ERROR, error)
        return Outcome(status, error, exit=program_exit)

    def _send(self, sock: socket.socket, message: dict[str, Any]) -> None:
        clock = self.supervisor.clock
        try:
            sock.settimeout(max(clock.deadline - time.monotonic(), 0.001))
            sock.sendall(encode_message(message))
        except TimeoutError:
            raise clock.timeout() from None
        except OSError as exc:
            raise Abort(RUNTIME_ERROR, f"the test process did not take its test: {exc}") from None
