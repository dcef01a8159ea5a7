"""An operator's sandbox template as a test builds it: Debian packages (one of them, sudo, setuid
root), a wheel of its own from a folder (offline), a data file, and files a careless or hostile
recipe would bring in with modes that must not survive the build (setuid, world-writable)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import docker

# One per pytest process: the suite's parts run beside each other, and each removes its own
# template when it ends, while the other may still be using one.
NAME = f"airlock-test-template-{os.getpid()}"
WHEEL_MODULE = "airlock_test_wheel"
DATA = "a,b\n1,2\n"
# Where the recipe puts each of its careless files, and the mode it has next to the recipe.
CARELESS = {"/usr/local/bin/airlock-test-hello": 0o4777, "/opt/airlock-test/open-data": 0o666}


def write_wheel(folder: Path, module: str, source: str) -> Path:
    """A wheel of one module, as pip reads it (no build tool needed)."""
    dist = f"{module}-1.0.dist-info"
    path = folder / f"{module}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{module}/__init__.py", source)
        wheel.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
        wheel.writestr(
            f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(
            f"{dist}/RECORD", f"{module}/__init__.py,,\n{dist}/METADATA,,\n{dist}/WHEEL,,\n{dist}/RECORD,,\n"
        )
    return path


def write_recipe(folder: Path) -> Path:
    (folder / "wheels").mkdir(parents=True)
    write_wheel(folder / "wheels", WHEEL_MODULE, "ANSWER = 42\n")
    (folder / "lookup.csv").write_text(DATA)
    (folder / "hello").write_text("#!/bin/sh\necho hello from the template\n")
    (folder / "open-data").write_text("anyone may change me\n")
    for source, mode in zip(("hello", "open-data"), CARELESS.values(), strict=True):
        os.chmod(folder / source, mode)
    recipe = folder / "template.toml"
    recipe.write_text(
        f'name = "{NAME}"\nfrom = "python"\npackages = ["jq", "sudo"]\npip = ["{WHEEL_MODULE}"]\nwheels = "wheels"\n\n'
        '[files]\n"lookup.csv" = "/opt/airlock-test/lookup.csv"\n'
        + "".join(f'"{source}" = "{where}"\n' for source, where in zip(("hello", "open-data"), CARELESS, strict=True))
    )
    return recipe


@contextmanager
def built_template(folder: Path) -> Iterator[str]:
    """The template built with ``airlock images build --template``, as an operator does; removed after."""
    recipe = write_recipe(folder)
    built = subprocess.run(
        [sys.executable, "-m", "engine", "images", "build", "--template", str(recipe)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    try:
        yield NAME
    finally:
        client = docker.from_env()
        try:
            for image in client.images.list(name=f"airlock/template-{NAME}"):
                for tag in image.tags:
                    client.images.remove(tag, force=True)
        finally:
            client.close()
