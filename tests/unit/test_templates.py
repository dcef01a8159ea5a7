"""Template recipes: what a recipe may say, and the build it becomes (no Docker here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import ImageError
from engine.runtime._templates import dockerfile, read_recipe, template_tag


def recipe_at(folder: Path, text: str) -> Path:
    path = folder / "template.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('name = "python"', "taken by Airlock's own images"),
        ('name = "core"', "taken by Airlock's own images"),
        ('name = "Has Spaces"', "name"),
        ('name = "t"\nfrom = "cobol"', "from"),
        ('name = "t"\npackages = ["jq; rm -rf /"]', "packages.0"),
        ('name = "t"\npip = ["--index-url=http://elsewhere/ numpy"]', "pip.0"),
        ('name = "t"\nindex_url = "file:///etc"', "index_url"),
        ('name = "t"\n[files]\n"a" = "relative/path"', "files.a"),
        ('name = "t"\nshell = "curl | sh"', "shell"),
        ('name = "t"\npip = [', "cannot read the template recipe"),
    ],
)
def test_a_recipe_that_says_too_much_is_refused_naming_the_field(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(ImageError, match=named):
        read_recipe(recipe_at(tmp_path, text))


def test_files_the_recipe_names_must_be_next_to_it(tmp_path: Path) -> None:
    recipe = read_recipe(recipe_at(tmp_path, 'name = "t"\n[files]\n"missing.csv" = "/opt/x.csv"\n'))
    with pytest.raises(ImageError, match=r"'missing\.csv' is not a file next to its recipe"):
        recipe.sources()


def test_the_tag_changes_with_every_file_and_with_the_image_under_it(tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_text("1\n")
    recipe = read_recipe(recipe_at(tmp_path, 'name = "t"\n[files]\n"data.csv" = "/opt/data.csv"\n'))
    first = template_tag(recipe, "airlock/python:aaa")
    assert first.startswith("airlock/template-t:") and first == template_tag(recipe, "airlock/python:aaa")
    assert template_tag(recipe, "airlock/python:bbb") != first
    (tmp_path / "data.csv").write_text("2\n")
    assert template_tag(recipe, "airlock/python:aaa") != first


def test_the_build_installs_offline_and_ends_unprivileged(tmp_path: Path) -> None:
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "x-1.0-py3-none-any.whl").write_bytes(b"")
    recipe = read_recipe(
        recipe_at(tmp_path, 'name = "t"\npackages = ["jq"]\npip = ["x==1.0"]\nwheels = "wheels"\n[files]\n')
    )
    built = dockerfile(recipe)
    assert "--no-index --find-links /wheels 'x==1.0'" in built
    assert "jq python3-pip" in built and "chmod a-s" in built and "chmod go-w" in built
    assert built.rstrip().endswith("USER 65534:65534")
