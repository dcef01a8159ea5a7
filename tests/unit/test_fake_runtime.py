"""The shipped fake runtime passes the same conformance kit as the real ones."""

from __future__ import annotations

import pytest

from engine.testing import FakeRuntime, check_runtime

pytestmark = pytest.mark.anyio


async def test_the_fake_runtime_conforms() -> None:
    await check_runtime(FakeRuntime, "fake")
