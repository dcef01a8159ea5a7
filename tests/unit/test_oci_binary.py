"""Which OCI binary each runtime picks: crun where it can run, runc otherwise, and a clear
refusal for a binary that is missing or cannot run on this host."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine import RuntimeUnavailable
from engine.runtime import _oci, choose_docker_runtime
from engine.runtime._oci import choose_oci_binary

needs_both = pytest.mark.skipif(
    not all(shutil.which(binary) for binary in ("crun", "runc")), reason="needs crun and runc installed"
)


@pytest.fixture
def unified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the hybrid host's v2 hierarchy's controller list."""
    path = tmp_path / "cgroup.controllers"
    monkeypatch.setattr(_oci, "UNIFIED_CONTROLLERS", path)
    return path


@needs_both
def test_crun_is_preferred_where_it_can_run(unified: Path) -> None:
    unified.write_text("\n")
    assert Path(choose_oci_binary()).name == "crun"
    unified.unlink()  # a host without a hybrid hierarchy
    assert Path(choose_oci_binary()).name == "crun"


@needs_both
def test_a_controller_on_the_v2_hierarchy_of_a_hybrid_host_falls_back_to_runc(unified: Path) -> None:
    unified.write_text("hugetlb\n")
    assert Path(choose_oci_binary()).name == "runc"
    with pytest.raises(RuntimeUnavailable, match=r"hugetlb is attached to the v2 hierarchy.*scripts/setup"):
        choose_oci_binary("crun")
    assert Path(choose_oci_binary("runc")).name == "runc"


def test_a_missing_binary_is_named() -> None:
    with pytest.raises(RuntimeUnavailable, match="'no-such-oci-runtime' is not installed"):
        choose_oci_binary("no-such-oci-runtime")


def test_docker_runs_the_runc_tier_on_crun_where_dockerd_has_it() -> None:
    assert choose_docker_runtime({"runc", "crun", "runsc"}) == "crun"
    assert choose_docker_runtime({"runc", "runsc"}) is None  # the daemon's default
    assert choose_docker_runtime({"runc", "crun"}, "runc") == "runc"
    with pytest.raises(RuntimeUnavailable, match=r"dockerd has no runtime named 'crun' \(it has runc\).*scripts/setup"):
        choose_docker_runtime({"runc"}, "crun")
