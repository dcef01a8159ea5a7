"""Piston's v2 API from `airlock serve`: raw requests as a Piston client sends them, and the real
reward-kit's C++ reward pointed at the server (its Piston client, unmodified)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from compat.external import REWARD_KIT, reward_kit_path
from integration.serving import Server

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def server(language_images: None) -> Iterator[Server]:
    # No API key: Piston clients send none (the server stays on loopback, where that is allowed).
    running = Server("runc", api_key=None)
    yield running
    assert "Traceback" not in running.stop()


def execute(server: Server, **body: object) -> httpx.Response:
    return httpx.post(f"{server.url}/api/v2/execute", json=body, timeout=120)


def test_runtimes_and_runs_in_each_stage(server: Server) -> None:
    runtimes = httpx.get(f"{server.url}/api/v2/runtimes", timeout=10).json()
    assert {"language": "c++", "version": "12.2.0", "aliases": ["cpp", "g++"]} in runtimes
    python = execute(server, language="python", version="*", files=[{"content": "print(input()[::-1])"}], stdin="abc")
    assert python.json()["run"] == {"stdout": "cba\n", "stderr": "", "output": "cba\n", "code": 0, "signal": None}
    assert "compile" not in python.json()
    cpp = execute(server, language="cpp", version="10.2.0", files=[{"name": "main.cpp", "content": "int main( {"}])
    assert cpp.json()["compile"]["code"] == 1 and "expected" in cpp.json()["compile"]["stderr"]
    assert "run" not in cpp.json()
    slow = execute(server, language="c", files=[{"content": "int main(void){for(;;);}"}], run_timeout=500)
    assert slow.json()["compile"]["code"] == 0
    assert slow.json()["run"]["code"] is None and slow.json()["run"]["signal"] == "SIGKILL"
    unparsable = execute(server, language="python", files=[{"content": "print(1 +"}]).json()
    assert "compile" not in unparsable and unparsable["run"]["code"] == 1
    assert "SyntaxError" in unparsable["run"]["stderr"]
    crash = execute(server, language="js", files=[{"content": "process.exit(3)"}])
    assert crash.json()["run"]["code"] == 3 and crash.json()["language"] == "javascript"


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"language": "cobol", "files": [{"content": "x"}]}, "cobol is not a runtime here"),
        ({"language": "python", "files": []}, "files: List should have at least 1 item"),
        ({"language": "python"}, "files: Field required"),
        ({"language": "python", "files": [{"content": "x"}], "run_timeout": -5}, "run_timeout"),
        ({"language": "python", "files": [{"content": "x"}, {"name": "../up.py", "content": "x"}]}, "files.1.name"),
        ({"language": "python", "files": [{"content": "x"}], "args": ["a"] * 300}, "args"),
    ],
)
def test_bad_requests_name_the_problem(server: Server, body: dict[str, object], named: str) -> None:
    answer = execute(server, **body)
    assert answer.status_code == 400 and named in answer.json()["message"]
    broken = httpx.post(f"{server.url}/api/v2/execute", content=b"{not json", timeout=10)
    assert broken.status_code == 400 and "message" in broken.json()


def test_several_files_and_arguments_as_piston_runs_them(server: Server) -> None:
    # The first file runs; the others sit beside it (imported, included, compiled with it) and in
    # its working directory (read by name); the arguments follow; a file may come base64-encoded.
    python = execute(
        server,
        language="python",
        files=[
            {
                "name": "run.py",
                "content": "import sys, helper\nprint(helper.twice(sys.argv[1:]), open('data.bin', 'rb').read())",
            },
            {"name": "helper.py", "content": "def twice(xs):\n    return xs * 2\n"},
            {"name": "data.bin", "content": base64.b64encode(b"\xff from a file").decode(), "encoding": "base64"},
        ],
        args=["a", "b c"],
    ).json()
    assert python["run"]["stdout"] == "['a', 'b c', 'a', 'b c'] b'\\xff from a file'\n", python
    cpp = execute(
        server,
        language="c++",
        files=[
            {
                "name": "main.cpp",
                "content": '#include "add.h"\n#include <cstdio>\nint main(int c, char** v) '
                '{ printf("%d\\n", add(c, 40)); }',
            },
            {"name": "add.h", "content": "int add(int a, int b);\n"},
            {"name": "add.cpp", "content": '#include "add.h"\nint add(int a, int b) { return a + b; }\n'},
        ],
        args=["one"],
    ).json()
    assert cpp["compile"]["code"] == 0 and cpp["run"]["stdout"] == "42\n", cpp


REWARD = """
import json, sys
from reward_kit.rewards.cpp_code import ioi_cpp_code_reward
endpoint = sys.argv[1]
code = "```cpp\\nint main() { long a, b; cin >> a >> b; cout << a + b << endl; }\\n```"
messages = [{"role": "assistant", "content": code}]
tests = [{"input": "1 2", "expected_output": "3"}, {"input": "5 5", "expected_output": "10"}]
right = ioi_cpp_code_reward(messages=messages, ground_truth=tests, piston_endpoint=endpoint)
wrong = ioi_cpp_code_reward(messages=messages, ground_truth=[{"input": "1 1", "expected_output": "3"}],
                            piston_endpoint=endpoint)
print(json.dumps([right.score, right.reason, wrong.score, wrong.reason]))
"""


@pytest.mark.installs(*REWARD_KIT)
def test_reward_kits_cpp_reward_through_the_server(server: Server) -> None:
    ran = subprocess.run(
        [sys.executable, "-c", REWARD, f"{server.url}/api/v2"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(reward_kit_path())},
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    right, right_reason, wrong, wrong_reason = json.loads(ran.stdout.strip().splitlines()[-1])
    assert (right, right_reason) == (1.0, "2/2 tests passed (100.00%).")
    assert wrong == 0.0 and wrong_reason == "0/1 tests passed (0.00%)."
