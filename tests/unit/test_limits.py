from __future__ import annotations

import pytest
from pydantic import ValidationError

from engine import DEFAULT_LIMITS, Limits


def test_defaults_are_locked_down() -> None:
    assert DEFAULT_LIMITS.memory_mb == 512
    assert DEFAULT_LIMITS.pids <= 256
    assert DEFAULT_LIMITS.cpus == 1.0
    assert DEFAULT_LIMITS.output_bytes == 1024 * 1024


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("time_s", -1),
        ("time_s", 0),
        ("time_s", 10**6),
        ("wall_time_s", -1),
        ("wall_time_s", 0),
        ("wall_time_s", 10**6),
        ("memory_mb", 1),
        ("memory_mb", 10**9),
        ("pids", 0),
        ("cpus", 0),
        ("cpus", 1000),
        ("output_bytes", 0),
        ("output_bytes", 10**12),
        ("open_files", 3),
    ],
)
def test_absurd_values_are_refused_naming_the_field(field: str, value: float) -> None:
    with pytest.raises(ValidationError) as info:
        Limits(**{field: value})
    assert info.value.errors()[0]["loc"] == (field,)


def test_the_time_limit_is_cpu_time_with_a_wall_clock_backstop() -> None:
    assert (DEFAULT_LIMITS.time_s, DEFAULT_LIMITS.wall_time_s) == (10, 21)
    assert (Limits(time_s=2).time_s, Limits(time_s=2).wall_time_s) == (2, 5)
    assert (Limits(time_s=2, wall_time_s=2.5).time_s, Limits(time_s=2, wall_time_s=2.5).wall_time_s) == (2, 2.5)
    # wall_time_s alone keeps the meaning it had before CPU limits: both limits at that value.
    assert (Limits(wall_time_s=3).time_s, Limits(wall_time_s=3).wall_time_s) == (3, 3)
    assert Limits(time_s=3).compile_wall_time_s == 21
    raised = Limits(memory_mb=256).with_time(4, 5)
    assert (raised.time_s, raised.wall_time_s, raised.compile_time_s, raised.memory_mb) == (4, 9, 5, 256)


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError) as info:
        Limits(memory=512)  # type: ignore[call-arg]
    assert info.value.errors()[0]["loc"] == ("memory",)


def test_scratch_space_must_fit_in_memory() -> None:
    with pytest.raises(ValidationError, match="tmpfs_mb"):
        Limits(memory_mb=64, tmpfs_mb=64)


def test_limits_are_immutable() -> None:
    with pytest.raises(ValidationError):
        DEFAULT_LIMITS.memory_mb = 1  # type: ignore[misc]
