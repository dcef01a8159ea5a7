from __future__ import annotations

import time
from collections.abc import Callable

from engine.runtime._capture import Capture, Lines


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


def test_lines_come_whole_across_chunks_and_an_overlong_one_is_dropped() -> None:
    lines = Lines(max_bytes=8)
    assert list(lines.feed(b"one\ntw")) == [b"one"]
    assert list(lines.feed(b"o\n\nthree")) == [b"two", b""]
    assert list(lines.feed(b"-and-more-than-eight")) == []
    assert list(lines.feed(b" still\nfour\n")) == [b"four"]
    assert lines.dropped == 1


def _early_and_late_seconds(make: Callable[[], object], feed: Callable[[object, bytes], object]) -> tuple[float, float]:
    """CPU seconds to feed the first and the last 4 MiB of one 64 MiB line without a newline, in
    16 KiB chunks (best of three). Linear reading costs the same for both; scanning the whole
    pending line for each chunk costs about thirty times more at the end."""
    chunk, chunks, segment = b"x" * (16 << 10), 4096, 256
    best_early = best_late = float("inf")
    for _ in range(3):
        target = make()
        started = time.process_time()
        for _ in range(segment):
            feed(target, chunk)
        early = time.process_time() - started
        for _ in range(chunks - 2 * segment):
            feed(target, chunk)
        started = time.process_time()
        for _ in range(segment):
            feed(target, chunk)
        late = time.process_time() - started
        feed(target, b"\n")
        best_early, best_late = min(best_early, early), min(best_late, late)
    return best_early, best_late


def test_a_line_of_many_megabytes_costs_time_linear_in_its_length() -> None:
    """A sandbox's process may write one huge line in small chunks: scanning the whole pending line
    for each chunk would cost time quadratic in its length (40 MiB took 13 s of the event loop).
    The two halves compared are measured in one run, so a busy machine slows both."""
    feeders: list[tuple[Callable[[], object], Callable[[object, bytes], object]]] = [
        (lambda: Lines(128 << 20), lambda lines, data: list(lines.feed(data))),  # type: ignore[attr-defined]
        (lambda: Capture(128 << 20, 1, lambda line: False), lambda capture, data: capture.feed_stdout(data)),  # type: ignore[attr-defined]
    ]
    for make, feed in feeders:
        early, late = _early_and_late_seconds(make, feed)
        assert late < 8 * max(early, 1e-4), (early, late)
