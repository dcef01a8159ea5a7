"""Sandbox uids: one per container in flight, across every engine on the host."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import SandboxError
from engine.runtime import UidPool


def test_two_engines_never_hold_the_same_uid(tmp_path: Path) -> None:
    first, second = UidPool(70000, 16, tmp_path), UidPool(70000, 16, tmp_path)
    leases = [pool.acquire() for pool in (first, second) for _ in range(8)]
    assert len({lease.uid for lease in leases}) == 16
    assert all(70000 <= lease.uid < 70016 for lease in leases)
    with pytest.raises(SandboxError, match="in use"):
        first.acquire()
    leases[0].release()
    assert second.acquire().uid == leases[0].uid


def test_a_released_uid_can_be_leased_again_by_its_own_engine(tmp_path: Path) -> None:
    pool = UidPool(70000, 16, tmp_path)
    held = [pool.acquire() for _ in range(16)]
    held[3].release()
    held[3].release()  # twice is harmless
    assert pool.acquire().uid == held[3].uid


def test_given_back_uids_leave_no_files(tmp_path: Path) -> None:
    pool = UidPool(70000, 16, tmp_path)
    leases = [pool.acquire() for _ in range(5)]
    assert len(list(tmp_path.iterdir())) == 5
    for lease in leases:
        lease.release()
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_deletes_what_dead_holders_left_and_nothing_held(tmp_path: Path) -> None:
    (tmp_path / "70003").write_text("")  # an engine died holding uid 70003
    pool = UidPool(70000, 16, tmp_path)
    held = pool.acquire()
    other = UidPool(70000, 16, tmp_path).acquire()
    pool.sweep()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([str(held.uid), str(other.uid)])
