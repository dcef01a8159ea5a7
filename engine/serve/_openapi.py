"""The OpenAPI document of the stateless dialects, the batch API and the operations endpoints,
built from the same pydantic models that read the requests and write the answers (E2B's API is
E2B's own, described by its SDK)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._version import __version__
from ._batch import JudgeErrorLine, JudgeLine, JudgeRequest
from ._piston import PistonExecute, PistonResult, PistonRuntime
from ._sandbox_fusion import RunCodeRequest, RunCodeResponse, RunJupyterRequest, RunJupyterResponse

__all__ = ["openapi"]


class Problem(BaseModel):
    """Why a request was refused; ``message`` names the field at fault."""

    code: int | None = None
    message: str


MODELS: list[type[BaseModel]] = [
    RunCodeRequest,
    RunCodeResponse,
    RunJupyterRequest,
    RunJupyterResponse,
    PistonExecute,
    PistonResult,
    PistonRuntime,
    JudgeRequest,
    JudgeLine,
    JudgeErrorLine,
    Problem,
]


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(schema: dict[str, Any], description: str = "") -> dict[str, Any]:
    return {"description": description or "OK", "content": {"application/json": {"schema": schema}}}


def _refusals(*statuses: int) -> dict[str, Any]:
    reasons = {
        400: "the request is malformed; the message names the field",
        401: "a valid API key is required",
        413: "the body is larger than the server accepts",
        422: "the request is malformed; the message names the field",
        429: "the server (or this API key) has as many requests in progress as it takes; see Retry-After",
    }
    return {str(status): _json(_ref(Problem), reasons[status]) for status in statuses}


def _body(model: type[BaseModel]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": _ref(model)}}}


def document(*, keyed: bool) -> dict[str, Any]:
    """The document; ``keyed``: the server was started with API keys, which the dialects need."""
    _, definitions = models_json_schema(
        [(model, "validation") for model in MODELS], ref_template="#/components/schemas/{model}"
    )
    work_refusals = _refusals(401, 413, 429)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Airlock", "version": __version__},
        "components": {
            "schemas": definitions["$defs"],
            "securitySchemes": {"apiKey": {"type": "apiKey", "in": "header", "name": "X-API-KEY"}},
        },
        "security": [{"apiKey": []}] if keyed else [],
        "paths": {
            "/run_code": {
                "post": {
                    "summary": "SandboxFusion: run one program",
                    "requestBody": _body(RunCodeRequest),
                    "responses": {"200": _json(_ref(RunCodeResponse)), **_refusals(422), **work_refusals},
                }
            },
            "/run_jupyter": {
                "post": {
                    "summary": "SandboxFusion: run cells in one Python kernel",
                    "requestBody": _body(RunJupyterRequest),
                    "responses": {"200": _json(_ref(RunJupyterResponse)), **_refusals(422), **work_refusals},
                }
            },
            "/api/v2/execute": {
                "post": {
                    "summary": "Piston: run one program",
                    "requestBody": _body(PistonExecute),
                    "responses": {"200": _json(_ref(PistonResult)), **_refusals(400), **work_refusals},
                }
            },
            "/api/v2/runtimes": {
                "get": {
                    "summary": "Piston: the languages served",
                    "responses": {"200": _json({"type": "array", "items": _ref(PistonRuntime)}), **_refusals(401)},
                }
            },
            "/v1/judge": {
                "post": {
                    "summary": "Judge many submissions; one NDJSON line per submission, in input order",
                    "requestBody": _body(JudgeRequest),
                    "responses": {
                        "200": {
                            "description": "one line per submission: its result, or why it could not be judged",
                            "content": {
                                "application/x-ndjson": {"schema": {"oneOf": [_ref(JudgeLine), _ref(JudgeErrorLine)]}}
                            },
                        },
                        **_refusals(422),
                        **work_refusals,
                    },
                }
            },
            "/healthz": {"get": {"summary": "Liveness", "security": [], "responses": {"200": _json({})}}},
            "/readyz": {
                "get": {
                    "summary": "Readiness: the container engine answers and the images are there",
                    "security": [],
                    "responses": {"200": _json({}), "503": _json({}, "not ready; `reason` says why")},
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics",
                    "responses": {
                        "200": {"description": "OK", "content": {"text/plain": {"schema": {"type": "string"}}}},
                        **_refusals(401),
                    },
                }
            },
        },
    }


def openapi(request: Request) -> Response:
    return JSONResponse(request.app.state.openapi)
