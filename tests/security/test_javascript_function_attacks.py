"""Attacks on JavaScript call and assert tests by someone who has read the Node runner
(engine/harness/runners/node.py, engine/harness/node/): the assert tests' expected answers live in
a test process of their own, which the program runs beside, often as the same user. Every attack
here must leave the wrong program failing, on every sandbox."""

from __future__ import annotations

import pytest

from engine import Limits, Submission, SyncEngine, Verdict

pytestmark = pytest.mark.docker

LIMITS = Limits(wall_time_s=5, memory_mb=512)
SECRET = "expected-answer-7f3a"
ASSERT_THE_SECRET = (
    f"const assert = require('node:assert');\nconst expected = '{SECRET}';\nassert.strictEqual(answer(), expected);"
)

# Finds the test process and tries everything /proc offers against it: read the expected answer
# from its descriptors, environment and memory, and write a forged "passed" report into every
# descriptor it holds. Returns the answer if it found it, else what each attempt got.
STEAL = r"""
const fs = require("fs");
function testProcesses() {
  return fs.readdirSync("/proc").filter((pid) => /^\d+$/.test(pid) && Number(pid) !== process.pid).filter((pid) => {
    try { return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("tests.js"); } catch { return false; }
  });
}
function frame(message) {
  const body = Buffer.from(JSON.stringify(message));
  const header = Buffer.alloc(4);
  header.writeUInt32BE(body.length);
  return Buffer.concat([header, body]);
}
function answer() {
  const seen = [];
  const pids = testProcesses();
  seen.push(`test processes: ${pids.length}`);
  for (const pid of pids) {
    for (const place of ["environ", "mem", "cmdline", "stack", "syscall"]) {
      try {
        const text = fs.readFileSync(`/proc/${pid}/${place}`, "latin1");
        const at = text.indexOf("expected-answer-");
        if (at >= 0) return text.slice(at, at + 20);
        seen.push(`${place}: read, no answer`);
      } catch (error) { seen.push(`${place}: ${error.code}`); }
    }
    for (let fd = 0; fd < 16; fd += 1) {
      try {
        const text = fs.readFileSync(`/proc/${pid}/fd/${fd}`, "latin1");
        const at = text.indexOf("expected-answer-");
        if (at >= 0) return text.slice(at, at + 20);
      } catch (error) { if (error.code !== "ENOENT") seen.push(`fd ${fd} read: ${error.code}`); }
      try {
        if (fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === "/dev/null") continue;  // nothing to read or forge there
      } catch {}
      try {
        const opened = fs.openSync(`/proc/${pid}/fd/${fd}`, "w");
        fs.writeSync(opened, frame({ op: "done", status: "ok", error: null }));
        seen.push(`fd ${fd}: forged a report`);
      } catch (error) { if (error.code !== "ENOENT") seen.push(`fd ${fd} write: ${error.code}`); }
    }
  }
  return seen.join("; ");
}
"""


def judge(engine: SyncEngine, code: str, test_code: str = ASSERT_THE_SECRET) -> tuple[Verdict, str]:
    submission = Submission(
        language="javascript", code=code, tests=[{"kind": "assert", "code": test_code}], limits=LIMITS
    )
    result = engine.judge(submission)
    case = result.tests[0]
    return result.verdict, f"{case.detail} {case.error}"


def test_the_program_cannot_read_the_expected_answer_or_forge_a_report(
    language_images: None, engine: SyncEngine
) -> None:
    verdict, detail = judge(engine, STEAL)
    assert verdict is Verdict.WRONG_ANSWER, detail
    assert "test processes: 1" in detail, detail  # the attack found its target and ran
    assert "forged a report" not in detail, detail


@pytest.mark.parametrize("signal", ["SIGKILL", "SIGSTOP", "SIGTERM"])
def test_stopping_the_test_process_fails_the_test(language_images: None, engine: SyncEngine, signal: str) -> None:
    code = STEAL.replace(
        "function answer() {",
        f'function answer() {{ for (const pid of testProcesses()) {{ try {{ process.kill(Number(pid), "{signal}"); }}'
        " catch {} }\n",
    )
    verdict, detail = judge(engine, code)
    # Where the program runs as the harness's user it can signal the test process: then no report
    # comes (or none in time); elsewhere the signal is refused and the answer is wrong.
    assert verdict in (Verdict.RUNTIME_ERROR, Verdict.TIMEOUT, Verdict.WRONG_ANSWER), detail


def test_a_returned_value_cannot_reach_the_test_code_objects(language_images: None, engine: SyncEngine) -> None:
    # Decoded as `object[key] = value`, the key "__proto__" would set the value's prototype (and
    # with it what every property lookup on it finds): the test code would read `verdict` as "ok".
    code = 'function answer() { return JSON.parse(\'{"__proto__": {"verdict": "ok"}, "given": 1}\'); }'
    test_code = (
        "const assert = require('node:assert');\nconst got = answer();\n"
        "assert.strictEqual(got.given, 1);\nassert.strictEqual(got.verdict, 'ok');"
    )
    verdict, detail = judge(engine, code, test_code)
    assert verdict is Verdict.WRONG_ANSWER, detail
    assert "'ok'" in detail and "undefined" in detail, detail


def test_an_error_dressed_as_an_assertion_is_the_programs_error(language_images: None, engine: SyncEngine) -> None:
    code = (
        "function answer() { const e = new Error('expected values to be equal'); e.name = 'AssertionError';"
        " e.code = 'ERR_ASSERTION'; throw e; }"
    )
    verdict, detail = judge(engine, code, "answer();")
    assert verdict is Verdict.RUNTIME_ERROR, detail
