"""The relay of interactive tests, piece by piece: the harness's reading of the host's feed, the
host's feed, the report reader passing data frames on; then a whole guessing game through the
engine on the fake runtime (real harnesses in local processes, no container)."""

from __future__ import annotations

import base64
import json
import os

import pytest
from reports import HELLO, frame

from engine import Engine, Interactor, Limits, Settings, StdinTest, Submission
from engine.harness.conversation import HostFeed
from engine.judge._protocol import HarnessFeed, ReportReader
from engine.runtime._images import image_tag
from engine.testing import FakeRuntime


def line(index: int, data: bytes | None = None) -> bytes:
    message: dict[str, object] = {"index": index, "end": True}
    if data is not None:
        message = {"index": index, "data": base64.b64encode(data).decode()}
    return json.dumps(message).encode() + b"\n"


def test_the_harness_keeps_what_comes_early_and_drops_what_comes_late() -> None:
    read, write = os.pipe()
    try:
        feed = HostFeed(read, start=line(0, b"first ")[:10])
        os.write(write, line(0, b"first ")[10:] + line(1, b"for the next test") + line(0, b"second") + line(0))
        feed.read()
        assert feed.take(0) == b"first second"
        assert feed.ended(0) and not feed.ended(1)
        feed.move_past(0)
        os.write(write, line(0, b"too late") + b"not json\n" + line(1))
        feed.read()
        assert feed.take(0) == b""
        assert feed.take(1) == b"for the next test"
        assert feed.ended(1) and not feed.closed
        os.close(write)
        write = -1
        feed.read()
        assert feed.closed and feed.ended(5)
    finally:
        for fd in (read, write):
            if fd >= 0:
                os.close(fd)


def test_the_hosts_feed_ends_once_all_was_taken() -> None:
    feed = HarnessFeed()
    try:
        feed.data(0, b"\x00\xffbytes")
        feed.end(0)
        taken = feed.take()
        assert taken is not None
        assert [json.loads(part) for part in taken.splitlines()] == [
            {"index": 0, "data": base64.b64encode(b"\x00\xffbytes").decode()},
            {"index": 0, "end": True},
        ]
        assert feed.take() == b""
        feed.data(1, b"last")
        feed.close()
        feed.data(1, b"after the end")
        assert feed.take() == line(1, b"last")
        assert feed.take() is None
    finally:
        feed.release()


def test_data_frames_go_to_the_peer_and_make_the_tests_stdout() -> None:
    peer = HarnessFeed()
    try:
        reader = ReportReader(2, peer, kept_bytes=5)
        data = {"type": "data", "index": 0, "data": base64.b64encode(b"? 500\n").decode()}
        for frame_line in (HELLO, json.dumps(data).encode(), frame(0)):
            assert reader(frame_line) is False
        assert reader.observations[0].stdout == "? 500"
        assert peer.take() == line(0, b"? 500\n") + line(0)
        # A data frame for a test other than the one running breaks the report.
        assert reader(json.dumps({**data, "index": 0}).encode()) is True
        assert reader.error is not None and "out of order" in reader.error
    finally:
        peer.release()


GUESS_INTERACTOR = """
import sys
secret = int(open(sys.argv[1]).read())
for _ in range(3):
    guess = int(sys.stdin.readline())
    print("higher" if secret > guess else "lower" if secret < guess else "yes", flush=True)
    if guess == secret:
        sys.exit(0)
sys.exit(1)
"""
SEARCH = """
lo, hi = 1, 7
while True:
    mid = (lo + hi) // 2
    print(mid, flush=True)
    answer = input()
    if answer == "yes":
        break
    lo, hi = (mid + 1, hi) if answer == "higher" else (lo, mid - 1)
"""


@pytest.mark.anyio
@pytest.mark.parametrize("slots", [1, 4])
async def test_a_guessing_game_through_the_engine(slots: int) -> None:
    # With one slot the interactor runs beside it (the pair must not wait for a second slot).
    runtime = FakeRuntime(images=[image_tag("python", Settings())])
    submission = Submission(
        code=SEARCH,
        tests=[StdinTest(input=str(secret)) for secret in (4, 1, 7)],
        interactor=Interactor(code=GUESS_INTERACTOR),
        limits=Limits(time_s=2),
    )
    async with Engine(Settings(max_concurrency=slots), runtime=runtime) as engine:
        result = await engine.judge(submission)
        assert engine.statistics().containers_in_flight <= slots
    assert [test.verdict.value for test in result.tests] == ["passed"] * 3
    assert result.tests[1].stdout == "4\n2\n1\n"
