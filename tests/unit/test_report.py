from __future__ import annotations

import json

import pytest
from reports import DONE, HELLO, frame

from engine._errors import HarnessProtocolError
from engine.harness.protocol import PROTOCOL_VERSION
from engine.judge._protocol import ReportReader


def feed(reader: ReportReader, *lines: bytes) -> None:
    # Every line is fed, even after the reader asked to stop: it must stay consistent.
    for line in lines:
        reader(line)


def test_a_complete_report_is_accepted() -> None:
    reader = ReportReader(2)
    feed(reader, HELLO, frame(0), frame(1, value={"$tuple": [1]}), DONE)
    reader.check(b"")
    assert reader.finished
    assert [o.index for o in reader.observations] == [0, 1]
    assert not reader.observations[0].has_value and reader.observations[1].has_value


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([json.dumps({"type": "hello", "protocol": 99, "tests": 2}).encode()], "protocol"),
        ([json.dumps({"type": "hello", "protocol": PROTOCOL_VERSION, "tests": 3}).encode()], "protocol"),
        ([HELLO, frame(1)], "out of order"),
        ([HELLO, frame(0), frame(0)], "out of order"),
        ([HELLO, frame(0), frame(1), frame(2)], "out of order"),
        ([HELLO, frame(0), json.dumps({"type": "done", "tests": 2}).encode()], "ends after"),
        ([HELLO, frame(0), frame(1), DONE, frame(0)], "after its end"),
        ([HELLO, b"not json"], "malformed"),
        ([HELLO, frame(0, status="passed")], "malformed"),
        ([HELLO, frame(0, verdict="passed")], "malformed"),
        ([HELLO, frame(0, exit_code="0")], "malformed"),
        ([HELLO, b'{"type": "test", "index": 0, "usage": {"wall_time_s": NaN}}'], "malformed"),
        ([json.dumps({"type": "error", "message": "bad request"}).encode()], "refused"),
        ([frame(0)], "malformed"),
    ],
)
def test_anything_outside_the_protocol_fails_closed(lines: list[bytes], message: str) -> None:
    reader = ReportReader(2)
    feed(reader, *lines)
    with pytest.raises(HarnessProtocolError, match=message):
        reader.check(b"")


def test_an_unterminated_tail_is_an_error() -> None:
    reader = ReportReader(2)
    feed(reader, HELLO, frame(0), frame(1), DONE)
    with pytest.raises(HarnessProtocolError, match="incomplete"):
        reader.check(b'{"type": "test"')


def test_reading_stops_at_the_end_never_at_a_failure() -> None:
    # Stopping the container at a failed test would tell the program that it failed.
    reader = ReportReader(2)
    assert reader(HELLO) is False
    assert reader(frame(0, status="runtime_error", exit_code=1)) is False
    assert reader(frame(1)) is False
    assert reader(DONE) is True


def test_the_hosts_statuses_are_the_harnesss() -> None:
    from engine.harness import protocol
    from engine.lowlevel import Status

    assert sorted(status.value for status in Status) == sorted(protocol.STATUSES)
