"""The drop-ins make an engine of their own on first use, with a warm pool: each test module
closes them when it is done, so that no later test finds their warm containers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engine.compat import prime_code
from engine.compat.reward_kit import code_execution


@pytest.fixture(autouse=True, scope="module")
def _close_the_drop_ins_engines() -> Iterator[None]:
    yield
    prime_code.close()
    code_execution.close()
