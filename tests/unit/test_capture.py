from __future__ import annotations

from engine.runtime._capture import Capture


def test_streams_are_capped_independently() -> None:
    capture = Capture(stdout_limit=5, stderr_limit=3)
    capture.feed_stdout(b"abc")
    capture.feed_stderr(b"xy")
    assert not capture.done
    capture.feed_stdout(b"defg")
    assert capture.stdout == b"abcde" and capture.stdout_truncated and capture.done
    capture.feed_stderr(b"zzz")
    assert capture.stderr == b"xyz" and capture.stderr_truncated


def test_lines_reach_the_sink_across_chunks_and_are_released() -> None:
    lines: list[bytes] = []

    def sink(line: bytes) -> bool:
        lines.append(line)
        return False

    capture = Capture(1000, 1000, sink)
    capture.feed_stdout(b"one\ntw")
    capture.feed_stdout(b"o\nthr")
    assert lines == [b"one", b"two"]
    assert capture.stdout == b"thr"  # consumed lines are not kept


def test_a_sink_can_stop_the_stream() -> None:
    capture = Capture(1000, 1000, lambda line: line == b"stop")
    capture.feed_stdout(b"go\nstop\nignored\n")
    assert capture.stopped and capture.done


def test_the_limit_counts_consumed_lines_too() -> None:
    capture = Capture(10, 10, lambda line: False)
    capture.feed_stdout(b"12345\n")
    capture.feed_stdout(b"67890\n")
    assert capture.stdout_truncated
