"""RayEngine on a real multi-node Ray cluster on this machine (``ray.cluster_utils.Cluster``,
loopback only): a head and two worker nodes, each with its own engine process, and a node whose
Docker cannot be reached. A batch survives losing a node halfway, with exactly one result per
input, in order, and nothing left running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import docker
import httpx
import pytest
from leftovers import our_containers

from engine import Settings, StdinTest, Submission, SubmissionResult, Verdict

# Ray's single-machine mode: every node, and the driver, on 127.0.0.1 (its cluster mode resolves
# "localhost" to the address of the machine's outward interface). Read when Ray is imported.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'airlock[ray]')")

pytestmark = pytest.mark.docker

SETTINGS = Settings(runtime="docker", max_concurrency=2)
NODE: dict[str, Any] = {"num_cpus": 1, "include_dashboard": False}


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Any, list[Any]]]:
    from ray.cluster_utils import Cluster

    try:
        made = Cluster(initialize_head=True, head_node_args={**NODE, "labels": {"airlock-node": "head"}})
    except Exception as exc:
        pytest.skip(f"Ray cannot start a cluster here: {exc}")
    try:
        workers = [made.add_node(**NODE, labels={"airlock-node": f"worker-{n}"}) for n in range(2)]
        # A node whose engine cannot reach Docker: it must be left out, not fail the batch.
        made.add_node(
            **NODE, labels={"airlock-node": "no-docker"}, env_vars={"DOCKER_HOST": "unix:///nonexistent.sock"}
        )
        yield made, workers
    finally:
        ray.shutdown()
        made.shutdown()  # type: ignore[no-untyped-call]


def doubling(n: int) -> Submission:
    return Submission(code="print(int(input()) * 2)", tests=[StdinTest(input=str(n), expected_output=str(2 * n))])


def test_a_node_without_docker_is_left_out_with_its_reason(cluster: tuple[Any, list[Any]]) -> None:
    from engine.distributed import RayEngine

    async def run() -> tuple[list[SubmissionResult], list[Any]]:
        async with RayEngine(cluster[0].address, SETTINGS) as engine:
            return await engine.judge_many([doubling(n) for n in range(12)]), engine.nodes()

    results, nodes = anyio.run(run)
    assert [r.verdict for r in results] == [Verdict.PASSED] * 12
    assert [r.tests[0].stdout for r in results] == [f"{2 * n}\n" for n in range(12)]
    out = [node for node in nodes if not node.alive]
    assert len(nodes) == 4 and len(out) == 1, nodes
    assert str(out[0].reason).startswith("RuntimeUnavailable: connecting to the Docker engine"), out[0].reason
    assert our_containers() == []


def test_airlock_score_judges_a_data_set_on_the_cluster(cluster: tuple[Any, list[Any]], tmp_path: Path) -> None:
    dataset = tmp_path / "doubling.jsonl"
    dataset.write_text("".join(doubling(n).model_dump_json() + "\n" for n in range(20)))
    results = tmp_path / "results.jsonl"
    ran = subprocess.run(
        [sys.executable, "-m", "engine", "score", str(dataset), "-o", str(results), "--ray", cluster[0].address],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "AIRLOCK_RUNTIME": "docker", "COLUMNS": "200"},
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert [line["verdict"] for line in lines] == ["passed"] * 20
    assert "nodes" in ran.stderr and "per second" in ran.stderr, ran.stderr
    assert "RuntimeUnavailable" in ran.stderr, "the node without Docker is shown as out, with its reason"
    assert our_containers() == []


def test_verls_batch_entry_point_spreads_over_the_cluster(
    cluster: tuple[Any, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.compat import prime_code, verl

    truth = json.dumps({"inputs": ["1 2\n", "20 22\n"], "outputs": ["3\n", "42\n"]})
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    half = "```python\na, b = map(int, input().split())\nprint(3)\n```"
    solutions = [right, half, "no code at all"] * 4
    monkeypatch.setenv("AIRLOCK_RAY", cluster[0].address)
    try:
        scores = verl.compute_score_batch(["codecontests"] * len(solutions), solutions, [truth] * len(solutions))
        opened = verl._cluster()
        assert opened is not None
        on_nodes = sum(node.judged for node in opened.nodes())
    finally:
        verl.close()
    monkeypatch.delenv("AIRLOCK_RAY")
    assert on_nodes == len(solutions), "the batch was not judged on the cluster's nodes"
    try:
        local = [verl.compute_score("codecontests", solution, truth) for solution in solutions[:3]]
    finally:
        prime_code.close()
    assert scores == local * 4
    assert local[0] == 1.0 and isinstance(local[1], float) and 0.0 < local[1] < 1.0
    assert our_containers() == []


def test_the_batch_api_judges_on_the_cluster(cluster: tuple[Any, list[Any]]) -> None:
    from integration.serving import API_KEY, Server

    server = Server("runc", "--ray", cluster[0].address)
    try:
        items: list[Any] = [doubling(n).model_dump(mode="json") for n in range(10)]
        items.append({"code": "print(1)"})  # no tests: an error line in its place
        answer = httpx.post(
            f"{server.url}/v1/judge", json={"submissions": items}, headers={"X-API-KEY": API_KEY}, timeout=300
        )
    finally:
        output = server.stop()
    assert answer.status_code == 200, answer.text
    lines = [json.loads(line) for line in answer.text.splitlines()]
    assert [line["index"] for line in lines] == list(range(11))
    assert [line["verdict"] for line in lines[:10]] == ["passed"] * 10
    assert [line["tests"][0]["stdout"] for line in lines[:10]] == [f"{2 * n}\n" for n in range(10)]
    assert "error" in lines[10]
    assert "Traceback" not in output, output[-3000:]
    assert our_containers() == []


@pytest.mark.slow  # 40 s: it removes and rebuilds an image
def test_a_node_missing_an_image_builds_it(cluster: tuple[Any, list[Any]]) -> None:
    from engine.distributed import RayEngine
    from engine.runtime._images import image_tag

    tag = image_tag("go", SETTINGS)
    client = docker.from_env(version="auto")
    try:
        client.images.remove(tag, force=True)
        program = 'package main\nimport "fmt"\nfunc main() { var a, b int; fmt.Scan(&a, &b); fmt.Println(a + b) }'
        submission = Submission(language="go", code=program, tests=[StdinTest(input="1 2", expected_output="3")])

        async def run() -> SubmissionResult:
            async with RayEngine(cluster[0].address, SETTINGS) as engine:
                return await engine.judge(submission)

        result = anyio.run(run)
        assert result.verdict is Verdict.PASSED, result
        assert client.images.get(tag).tags == [tag]
    finally:
        client.close()
    assert our_containers() == []


@pytest.mark.slow  # 90 s: 500 submissions, a node lost halfway
def test_losing_a_node_halfway_loses_no_result(cluster: tuple[Any, list[Any]]) -> None:
    from engine.distributed import RayEngine

    made, workers = cluster
    total = 500
    seen: Counter[int] = Counter()
    results: dict[int, SubmissionResult] = {}
    removed = threading.Event()

    async def run() -> list[Any]:
        async with RayEngine(made.address, SETTINGS) as engine:
            async with engine.judging(doubling(n) for n in range(total)) as stream:
                async for index, result in stream:
                    seen[index] += 1
                    results[index] = result
                    if len(results) == total // 2:
                        await anyio.to_thread.run_sync(made.remove_node, workers[0])
                        removed.set()
            return engine.nodes()

    nodes = anyio.run(run)
    assert removed.is_set()
    assert sorted(seen) == list(range(total)) and set(seen.values()) == {1}, "a result was lost or reported twice"
    wrong = {i: (r.verdict, r.tests[0].stdout) for i, r in results.items() if r.tests[0].stdout != f"{2 * i}\n"}
    assert not wrong, dict(list(wrong.items())[:5])
    lost = [node for node in nodes if not node.alive and node.judged > 0]
    assert len(lost) == 1, nodes  # the removed worker judged its share, then was given up
    assert sum(node.judged for node in nodes) == total
    assert our_containers() == [], "a container outlived the batch"
