"""`airlock serve` as a service: the batch API, health and readiness, Prometheus metrics,
backpressure, per-key quotas, body limits, JSON logs and a graceful stop, on a real server."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from integration.serving import API_KEY, Server, free_port
from sandboxes import OCI

pytestmark = pytest.mark.docker

DOUBLE = "print(int(input()) * 2)\n"
SLEEPY = "import time\ntime.sleep({})\nprint('done')\n"


def stdin_submission(code: str, *pairs: tuple[str, str], **extra: Any) -> dict[str, Any]:
    tests = [{"kind": "stdin", "input": given, "expected_output": wanted} for given, wanted in pairs]
    return {"code": code, "tests": tests, **extra}


def judge(server: Server, submissions: list[Any], **headers: str) -> list[dict[str, Any]]:
    answer = httpx.post(f"{server.url}/v1/judge", json={"submissions": submissions}, headers=headers, timeout=300)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/x-ndjson"
    return [json.loads(line) for line in answer.text.splitlines()]


@pytest.fixture(scope="module")
def server(language_images: None) -> Iterator[Server]:
    running = Server("runc", api_key=None)
    yield running
    assert "Traceback" not in running.stop()


def test_batch_answers_every_item_once_in_input_order(server: Server) -> None:
    items: list[Any] = [
        stdin_submission(SLEEPY.format(1.5), ("", "done\n"), id="slow-first"),
        stdin_submission(DOUBLE, ("2", "4\n"), ("5", "11\n")),
        {"code": "x"},
        "not an object",
        stdin_submission("int main( {", ("", ""), language="cpp", id="broken-cpp"),
        {
            "task_id": "HumanEval/x",
            "prompt": "def inc(x):\n",
            "completion": "    return x + 1\n",
            "test": "def check(candidate):\n    assert candidate(1) == 2\n",
            "entry_point": "inc",
        },
    ]
    lines = judge(server, items)
    assert [line["index"] for line in lines] == list(range(len(items)))
    assert lines[0]["id"] == "slow-first" and lines[0]["verdict"] == "passed"
    assert lines[1]["id"] == "item-1" and lines[1]["verdict"] == "wrong_answer" and lines[1]["passed"] == 1
    assert lines[2] == {"index": 2, "id": "item-2", "error": lines[2]["error"]}
    assert "cannot tell the layout" in lines[2]["error"]
    assert "must be a JSON object" in lines[3]["error"]
    assert lines[4]["verdict"] == "compile_error" and lines[4]["id"] == "broken-cpp"
    assert lines[5]["id"] == "HumanEval/x" and lines[5]["verdict"] == "passed"


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b"{not json", "Invalid JSON"),
        (b"[]", "Input should be an object"),
        (b'{"submissions": []}', "submissions: List should have at least 1 item"),
        (b'{"submissions": [1], "extra": 1}', "extra: Extra inputs are not permitted"),
        (b'{"submissions": [1], "deadline_s": "5"}', "deadline_s: Input should be a valid number"),
        (b'{"submissions": [1], "deadline_s": -1e-128}', "deadline_s: Input should be greater than 0"),
    ],
)
def test_batch_refuses_a_malformed_request_naming_the_field(server: Server, body: bytes, named: str) -> None:
    answer = httpx.post(f"{server.url}/v1/judge", content=body, timeout=30)
    assert answer.status_code == 422 and named in answer.json()["message"]


def test_a_client_that_leaves_cancels_its_batch(server: Server) -> None:
    items = [stdin_submission(SLEEPY.format(60), ("", "done\n")) for _ in range(3)]
    with httpx.stream("POST", f"{server.url}/v1/judge", json={"submissions": items}, timeout=120) as answer:
        assert answer.status_code == 200
        deadline = time.monotonic() + 30
        while _metric(httpx.get(f"{server.url}/metrics", timeout=10).text, "airlock_containers_in_flight") < 3:
            assert time.monotonic() < deadline, "the batch's jobs never started"
            time.sleep(0.2)
    # Gone long before the programs' 60 s: their containers were removed when the client left.
    deadline = time.monotonic() + 20
    while _metric(httpx.get(f"{server.url}/metrics", timeout=10).text, "airlock_containers_in_flight") > 0:
        assert time.monotonic() < deadline, "the batch went on after its client left"
        time.sleep(0.2)


def test_health_readiness_and_the_openapi_document(server: Server) -> None:
    assert httpx.get(f"{server.url}/healthz", timeout=10).json() == {"status": "ok"}
    assert httpx.get(f"{server.url}/readyz", timeout=10).json() == {"status": "ready"}
    document = httpx.get(f"{server.url}/openapi.json", timeout=10).json()
    assert document["openapi"].startswith("3.1")
    assert {"/run_code", "/api/v2/execute", "/api/v2/runtimes", "/v1/judge", "/metrics"} <= set(document["paths"])
    assert "RunCodeRequest" in document["components"]["schemas"]


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.split(" ")[0] == name:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} is not in the metrics")


def test_metrics_count_requests_verdicts_and_the_engine(server: Server) -> None:
    httpx.post(f"{server.url}/run_code", json={"code": "print(1)", "language": "python"}, timeout=60)
    httpx.post(f"{server.url}/api/v2/execute", json={"language": "python", "files": [{"content": "1/0"}]}, timeout=60)
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    assert _metric(text, 'airlock_verdicts_total{dialect="sandbox_fusion",verdict="ok"}') >= 1
    assert _metric(text, 'airlock_verdicts_total{dialect="piston",verdict="runtime_error"}') >= 1
    assert _metric(text, 'airlock_requests_total{dialect="sandbox_fusion",status="200"}') >= 1
    assert _metric(text, "airlock_container_start_seconds_count") >= 2
    assert _metric(text, "airlock_job_seconds_count") >= 2
    hits = _metric(text, 'airlock_pool_takes_total{result="hit"}')
    misses = _metric(text, 'airlock_pool_takes_total{result="miss"}')
    assert hits + misses >= 2
    gauges = ("airlock_queue_depth", "airlock_containers_in_flight", "airlock_pool_ready", "airlock_sandboxes_alive")
    assert all(_metric(text, gauge) >= 0 for gauge in gauges)


def _post_many(url: str, bodies: list[dict[str, Any]], headers: dict[str, str] | None = None) -> list[httpx.Response]:
    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(lambda body: httpx.post(url, json=body, headers=headers, timeout=120), bodies))


def test_backpressure_quotas_and_body_limits() -> None:
    keys = ["e2b_" + "b2" * 20, "e2b_" + "c3" * 20]
    running = Server("runc", "--max-pending", "3", "--key-concurrency", "2", "--max-body-mb", "0.05", api_key=None)
    try:
        slow = {"code": SLEEPY.format(3), "language": "python"}
        # One client alone: at most 3 in progress; the rest are told to come back.
        answers = _post_many(f"{running.url}/run_code", [slow] * 6)
        statuses = sorted(answer.status_code for answer in answers)
        assert statuses == [200, 200, 200, 429, 429, 429], statuses
        refused = next(answer for answer in answers if answer.status_code == 429)
        assert refused.headers["retry-after"] == "1" and "its limit" in refused.json()["message"]
        # Two keys: each gets at most 2 in progress.
        one = _post_many(f"{running.url}/run_code", [slow] * 3, headers={"X-API-KEY": keys[0]})
        assert sorted(answer.status_code for answer in one) == [200, 200, 429]
        assert "quota" in next(a for a in one if a.status_code == 429).json()["message"]
        big = {"code": "#" * 100_000, "language": "python"}
        too_large = httpx.post(f"{running.url}/run_code", json=big, timeout=30)
        assert too_large.status_code == 413 and "larger than the server's limit" in too_large.json()["message"]
        chunked = httpx.post(f"{running.url}/run_code", content=iter([json.dumps(big).encode()]), timeout=30)
        assert chunked.status_code == 413
        text = httpx.get(f"{running.url}/metrics", timeout=10).text
        assert _metric(text, 'airlock_requests_rejected_total{dialect="sandbox_fusion",reason="queue_full"}') == 3
        assert _metric(text, 'airlock_requests_rejected_total{dialect="sandbox_fusion",reason="key_quota"}') == 1
        assert _metric(text, 'airlock_requests_rejected_total{dialect="sandbox_fusion",reason="too_large"}') == 2
    finally:
        output = running.stop()
    assert "Traceback" not in output


def test_the_api_key_guards_the_dialects_and_metrics() -> None:
    running = Server("runc", api_key=API_KEY)
    try:
        for method, path in (("POST", "/run_code"), ("POST", "/v1/judge"), ("GET", "/metrics")):
            assert httpx.request(method, f"{running.url}{path}", json={}, timeout=10).status_code == 401
        bearer = {"Authorization": f"Bearer {API_KEY}"}
        assert httpx.get(f"{running.url}/metrics", headers=bearer, timeout=10).status_code == 200
        assert httpx.get(f"{running.url}/healthz", timeout=10).status_code == 200
    finally:
        running.stop()


def test_a_stop_finishes_what_is_in_progress_and_logs_json_lines() -> None:
    running = Server("runc", api_key=None)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        body = {"code": SLEEPY.format(3), "language": "python"}
        pending = pool.submit(httpx.post, f"{running.url}/run_code", json=body, timeout=60)
        time.sleep(1.5)
        running.process.send_signal(signal.SIGTERM)
        answer = pending.result()
    assert answer.status_code == 200 and answer.json()["run_result"]["stdout"] == "done\n"
    running.process.wait(timeout=60)
    output = running.stop()
    records = [json.loads(line) for line in output.splitlines() if line.strip()]
    requests = [r for r in records if r.get("event") == "request" and r["path"] == "/run_code"]
    assert requests and requests[-1]["status"] == 200 and requests[-1]["dialect"] == "sandbox_fusion"
    assert requests[-1]["seconds"] >= 3
    assert not any("exception" in record for record in records)


def test_a_second_server_on_one_paused_folder_stops_at_once_naming_the_first(tmp_path: Path) -> None:
    """Each would take up, resume and expire the other's paused sandboxes, and one starting would
    delete the archive a pause of the other is writing. A command that judges uses no folder."""
    paused = tmp_path / "paused"
    with Server("runc", "--paused-dir", str(paused)) as first:
        second = subprocess.run(
            [sys.executable, "-m", "engine", "serve", "--port", str(free_port()), "--paused-dir", str(paused)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode == 3, second
        assert f"another engine process (pid {first.process.pid})" in second.stderr.replace("\n", " "), second.stderr
        assert "Traceback" not in second.stderr
        program = tmp_path / "program.py"
        program.write_text("print(6 * 7)")
        judged = subprocess.run(
            [sys.executable, "-m", "engine", "run", str(program), "--language", "python"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "AIRLOCK_PAUSED_DIR": str(paused)},
        )
        assert judged.returncode == 0 and "42" in judged.stdout, judged
    assert list(paused.iterdir()) == []


def test_jobs_and_sandboxes_on_the_oci_runtime() -> None:
    running = Server(OCI.require().isolation, "--runtime", OCI.runtime, api_key=None)
    try:
        ran = httpx.post(f"{running.url}/run_code", json={"code": "print(6 * 7)", "language": "python"}, timeout=120)
        assert ran.json()["run_result"]["stdout"] == "42\n"
        lines = judge(running, [stdin_submission(DOUBLE, ("4", "8\n"))])
        assert lines[0]["verdict"] == "passed"
        # run_jupyter's kernel runs in a sandbox of the OCI runtime too.
        cells = httpx.post(f"{running.url}/run_jupyter", json={"cells": ["6 * 7"]}, timeout=120).json()["cells"]
        assert cells[0]["display"] == [{"text/plain": "42"}]
        assert httpx.get(f"{running.url}/readyz", timeout=30).json() == {"status": "ready"}
        text = httpx.get(f"{running.url}/metrics", timeout=10).text
        assert _metric(text, "airlock_job_seconds_count") >= 2
    finally:
        output = running.stop()
    assert "Traceback" not in output


def test_a_batch_with_a_deadline_answers_every_item_by_then(server: Server) -> None:
    items = [stdin_submission(DOUBLE, ("2", "4\n")), stdin_submission(SLEEPY.format(60), ("", "done\n"))]
    started = time.monotonic()
    answer = httpx.post(f"{server.url}/v1/judge", json={"submissions": items, "deadline_s": 4}, timeout=120)
    assert time.monotonic() - started < 4 + 5
    quick, slow = [json.loads(line) for line in answer.text.splitlines()]
    assert quick["verdict"] == "passed" and quick["retryable"] is False
    assert slow["verdict"] == "sandbox_error" and slow["retryable"] is True and "deadline" in slow["error"]["message"]
