"""Removing what a test left, however it left it (the harness's scrub, run here on a host folder)."""

from __future__ import annotations

import os
from pathlib import Path

from engine.harness.workspace import clear_directory, remove_tree


def test_a_chain_deeper_than_path_max_is_removed(tmp_path: Path) -> None:
    top = tmp_path / "work"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(2000):  # 8 KB of path, twice PATH_MAX
            os.mkdir("dir", dir_fd=fd)
            child = os.open("dir", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(os.open("leaf", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    finally:
        os.close(fd)
    remove_tree(str(top))
    assert not top.exists()


def test_modes_do_not_protect_anything(tmp_path: Path) -> None:
    top = tmp_path / "work"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "file").write_text("x")
    (top / "a" / "b").chmod(0)
    (top / "a").chmod(0)
    clear_directory(str(top))
    assert list(top.iterdir()) == []


def test_links_are_removed_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    top = tmp_path / "work"
    top.mkdir()
    (top / "link").symlink_to(outside)
    (top / "file-link").symlink_to(outside / "precious")
    clear_directory(str(top))
    assert list(top.iterdir()) == []
    assert (outside / "precious").read_text() == "keep"


def test_kept_names_stay_at_the_top_only(tmp_path: Path) -> None:
    top = tmp_path / "tmp"
    (top / "workspace" / "nested").mkdir(parents=True)
    (top / "workspace" / "main.py").write_text("x")
    (top / "other" / "workspace").mkdir(parents=True)
    (top / "stray").write_text("x")
    clear_directory(str(top), keep={"workspace"})
    assert sorted(p.name for p in top.iterdir()) == ["workspace"]
    assert (top / "workspace" / "main.py").exists()


def test_a_wide_directory_is_listed_once(tmp_path: Path) -> None:
    top = tmp_path / "wide"
    top.mkdir()
    for index in range(3000):
        (top / f"d{index}").mkdir()
        (top / f"f{index}").write_text("")
    clear_directory(str(top))
    assert list(top.iterdir()) == []
