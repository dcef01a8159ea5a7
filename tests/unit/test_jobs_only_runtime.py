"""A runtime that cannot start commands in a running container refuses sandboxes by name."""

from __future__ import annotations

import pytest

from engine import RuntimeUnavailable, Settings, SyncEngine
from engine.runtime._images import image_tag
from engine.testing import FakeRuntime


def test_a_runtime_without_sandboxes_says_so() -> None:
    runtime = FakeRuntime(images=[image_tag("python", Settings())])
    with (
        SyncEngine(Settings(pool_size=0), runtime=runtime) as engine,
        pytest.raises(RuntimeUnavailable, match=r"the fake runtime runs jobs only; .* the docker or the oci runtime"),
        engine.sandbox(),
    ):
        pass
