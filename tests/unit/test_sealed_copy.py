"""crun started from the OCI runtime's sealed copy of itself: nothing can write to that copy (what
crun's own copy on every call guards against, CVE-2019-5736), and crun runs from it."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess

import pytest

from engine.runtime._oci import SEALED, sealed_copy


def test_the_sealed_copy_of_crun_takes_no_write_and_runs() -> None:
    crun = shutil.which("crun")
    if crun is None:
        pytest.skip("crun is not installed here (scripts/setup installs it)")
    copy = sealed_copy(crun)
    try:
        assert fcntl.fcntl(copy, fcntl.F_GET_SEALS) == SEALED
        for write in (lambda: os.write(copy, b"\0"), lambda: os.ftruncate(copy, 0), lambda: os.pwrite(copy, b"\0", 0)):
            with pytest.raises(PermissionError):
                write()
        with pytest.raises(PermissionError):  # the seals themselves are sealed
            fcntl.fcntl(copy, fcntl.F_ADD_SEALS, 0)
        ran = subprocess.run([f"/proc/{os.getpid()}/fd/{copy}", "--version"], capture_output=True, text=True)
        assert ran.returncode == 0 and ran.stdout.startswith("crun version"), ran
    finally:
        os.close(copy)
