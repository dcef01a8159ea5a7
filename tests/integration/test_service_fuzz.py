"""Property-based fuzzing of `airlock serve` from its own OpenAPI document (schemathesis): valid
and invalid requests to every operation it describes; none may get a 5xx, hang, answer outside
the document, or be let in without the API key. (The dialects' own tests check that each
refusal's message names the field at fault.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from integration.serving import API_KEY, Server

pytestmark = pytest.mark.docker

OPERATIONS = [
    ("POST", "/run_code"),
    ("POST", "/run_jupyter"),
    ("POST", "/api/v2/execute"),
    ("GET", "/api/v2/runtimes"),
    ("POST", "/v1/judge"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
]


@pytest.fixture(scope="module")
def fuzzed(language_images: None) -> Iterator[Server]:
    running = Server("runc", "--wall-time-s", "5", api_key=API_KEY)
    yield running
    assert "Traceback" not in running.stop()


@pytest.fixture(scope="module")
def api(fuzzed: Server) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{fuzzed.url}/openapi.json", headers={"X-API-KEY": API_KEY})


def test_the_fuzzed_operations_are_all_the_document_has(fuzzed: Server) -> None:
    paths = httpx.get(f"{fuzzed.url}/openapi.json", timeout=10).json()["paths"]
    described = {(method.upper(), path) for path, methods in paths.items() for method in methods}
    assert described == set(OPERATIONS)


# Requests that break the document: only operations with a body have something to break.
FUZZED = [
    (method, path, mode)
    for method, path in OPERATIONS
    for mode in schemathesis.GenerationMode
    if method == "POST" or mode is schemathesis.GenerationMode.POSITIVE
]


@pytest.mark.parametrize(("method", "path", "mode"), FUZZED)
def test_every_operation_holds_under_fuzzing(
    api: schemathesis.BaseSchema, method: str, path: str, mode: schemathesis.GenerationMode
) -> None:
    operation = api[path][method]

    # Valid requests that run code cost a container each: fewer of them, as many broken ones.
    examples = 15 if method == "POST" and mode is schemathesis.GenerationMode.POSITIVE else 25

    @given(case=operation.as_strategy(mode))
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def holds(case: schemathesis.Case[Any]) -> None:
        case.call_and_validate(headers={"X-API-KEY": API_KEY}, timeout=120)

    holds()
