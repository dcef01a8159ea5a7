"""What the wall-clock backstop gives back, from made-up readings of ``/proc``
(``CpuMeter.kept_waiting``): the longest wait of a program's process (and of the harness, only in
a conversation, where the program waits for it), for a CPU and for the disk, and no count of the
disk's that the kernel got wrong; and at the deadline (``Clock``): a tick at a time while the
program is awake, never past ten times the backstop; one look more, once, for an end that came
while the harness could not look; never more time for a program that sleeps on while the harness
waits for a CPU."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from engine.harness import processes
from engine.harness.processes import CpuMeter, _Process
from engine.harness.protocol import STARVED_ALLOWANCE
from engine.harness.supervisor import Abort, Clock

PROGRAM = 4242


class Readings:
    """The harness's and one program process's waits and states, as a test sets them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.waits = {os.getpid(): (0.0, 0.0), PROGRAM: (0.0, 0.0)}
        self.states = {os.getpid(): "R", PROGRAM: "S"}
        monkeypatch.setattr(processes, "_descendants", lambda root: {PROGRAM: self.read(PROGRAM)})
        monkeypatch.setattr(_Process, "read", classmethod(lambda cls, pid: self.read(pid)))

    def read(self, pid: int) -> _Process:
        waited, blocked = self.waits[pid]
        return _Process(pid, 1, 0.0, 0.0, waited, blocked, self.states[pid])


def started(*, harness_too: bool = False) -> CpuMeter:
    meter = CpuMeter()
    meter.start(harness_too=harness_too)
    # Long enough ago that waits of a few seconds fit in the step.
    meter._started -= 10
    return meter


@pytest.fixture
def readings(monkeypatch: pytest.MonkeyPatch) -> Readings:
    readings = Readings(monkeypatch)
    readings.waits = {os.getpid(): (5.0, 7.0), PROGRAM: (1.0, 2.0)}
    return readings


@pytest.fixture
def meter(readings: Readings) -> tuple[CpuMeter, Readings]:
    return started(), readings


def test_waits_for_a_cpu_and_for_the_disk_add_up(meter: tuple[CpuMeter, Readings]) -> None:
    cpu_meter, readings = meter
    readings.waits[PROGRAM] = (2.5, 4.0)
    assert cpu_meter.kept_waiting()[0] == pytest.approx(1.5 + 2.0)


def test_the_harness_kept_waiting_counts_only_in_a_conversation(readings: Readings) -> None:
    """A program that sleeps past the backstop sleeps on while the harness waits for a CPU: under
    load, those waits (up to 0.8 s beside the attack suite and six busy processes) made a program
    that slept 5 s pass a 3 s backstop. In a conversation the program waits for the harness."""
    alone, conversing = started(), started(harness_too=True)
    readings.waits[os.getpid()] = (5.0, 10.0)
    readings.waits[PROGRAM] = (1.5, 2.0)
    assert alone.kept_waiting()[0] == pytest.approx(0.5)
    assert conversing.kept_waiting()[0] == pytest.approx(3.0)


def test_a_count_of_the_disks_longer_than_the_step_is_none(meter: tuple[CpuMeter, Readings]) -> None:
    """The kernel (6.18 here) sometimes misses a wait's start and adds all of its uptime."""
    cpu_meter, readings = meter
    readings.waits[PROGRAM] = (1.5, 2.0 + 40000.0)
    assert cpu_meter.kept_waiting()[0] == pytest.approx(0.5)


def test_a_trusted_process_of_ours_is_left_out(meter: tuple[CpuMeter, Readings]) -> None:
    cpu_meter, readings = meter
    readings.waits[PROGRAM] = (9.0, 2.0)
    cpu_meter.trust(PROGRAM, 0.0)
    assert cpu_meter.kept_waiting()[0] == pytest.approx(0.0)


class WaitingMeter(CpuMeter):
    """A meter whose program has been kept waiting ``kept`` seconds, and is awake now or not."""

    def __init__(self) -> None:
        super().__init__()
        self.kept = 0.0
        self.waiting = False

    def kept_waiting(self) -> tuple[float, bool]:
        return self.kept, self.waiting


def at_the_deadline(meter: WaitingMeter) -> Clock:
    clock = Clock(None, meter)
    clock.start(1.0, 3.0, None, 1024)
    clock.deadline = time.monotonic() - 0.1
    return clock


def test_a_program_awake_at_the_deadline_gets_a_tick_more() -> None:
    meter = WaitingMeter()
    meter.waiting = True
    clock = at_the_deadline(meter)
    assert clock._give_back_waits()
    assert clock.deadline > time.monotonic()
    meter.waiting = False
    clock.deadline = time.monotonic() - 0.1
    assert not clock._give_back_waits()


def test_what_is_given_back_stops_at_ten_times_the_backstop() -> None:
    meter = WaitingMeter()
    meter.kept = 100.0
    clock = at_the_deadline(meter)
    before = clock.deadline
    assert clock._give_back_waits()
    assert clock.deadline - before == pytest.approx(STARVED_ALLOWANCE * 3.0)
    meter.waiting = True
    clock.deadline = time.monotonic() - 0.1
    assert not clock._give_back_waits()


@pytest.mark.parametrize(("state", "awake"), [("R", True), ("D", True), ("S", False), ("T", False), ("Z", False)])
def test_only_a_program_running_or_waiting_in_the_kernel_is_awake(
    meter: tuple[CpuMeter, Readings], state: str, awake: bool
) -> None:
    cpu_meter, readings = meter
    readings.states[PROGRAM] = state
    assert cpu_meter.kept_waiting()[1] is awake


def test_the_harness_itself_is_never_the_program_awake(meter: tuple[CpuMeter, Readings]) -> None:
    cpu_meter, readings = meter
    readings.states = {os.getpid(): "R", PROGRAM: "S"}
    assert cpu_meter.kept_waiting()[1] is False


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    yield read, write
    os.close(read)
    os.close(write)


def test_an_end_found_past_the_deadline_after_a_look_before_it_is_the_programs(pipe: tuple[int, int]) -> None:
    """The harness, kept from running, finds the program's report only past the deadline: it may
    have come in time. Once a step, and for a tick; then the report is read, and that is all."""
    read, write = pipe
    clock = at_the_deadline(WaitingMeter())
    clock._looked = clock.deadline - 0.05
    os.write(write, b"x")
    clock.wait(read)
    assert clock.deadline > time.monotonic()
    os.read(read, 1)
    clock.deadline = time.monotonic() - 0.1
    os.write(write, b"x")
    with pytest.raises(Abort):
        clock.wait(read)


@pytest.mark.parametrize(
    ("last_look", "reported"),
    [(0.01, True), (-0.05, False)],
    ids=["seen going past the deadline, whatever comes next", "nothing on the last look"],
)
def test_otherwise_the_deadline_is_a_timeout(pipe: tuple[int, int], last_look: float, reported: bool) -> None:
    read, write = pipe
    clock = at_the_deadline(WaitingMeter())
    clock._looked = clock.deadline + last_look
    if reported:
        os.write(write, b"x")
    with pytest.raises(Abort):
        clock.wait(read)
