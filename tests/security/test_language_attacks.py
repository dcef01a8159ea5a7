"""The core attacks written in C++ and JavaScript, as a compiled program and a Node program run
them: the walls are the container's, not Python's, so they hold whatever the language."""

from __future__ import annotations

import errno
import json
import time
from typing import Any

import pytest

from engine import Limits, Outcome, SyncEngine

pytestmark = pytest.mark.docker

SMALL = Limits(memory_mb=256, pids=64, wall_time_s=5, compile_time_s=60, tmpfs_mb=16)
REFUSED = {errno.EAFNOSUPPORT, errno.EPERM, errno.EACCES}

CPP_PROBE = r"""
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
int fails(int result) { return result < 0 ? errno : 0; }
int main() {
    int inet = fails(socket(AF_INET, SOCK_STREAM, 0));
    int inet6 = fails(socket(AF_INET6, SOCK_DGRAM, 0));
    int packet = fails(socket(AF_PACKET, SOCK_RAW, 0));
    int root = fails(open("/etc/passwd", O_WRONLY));
    int made = fails(open("/usr/bin/planted", O_WRONLY | O_CREAT, 0755));
    int shadow = fails(open("/etc/shadow", O_RDONLY));
    printf("{\"inet\": %d, \"inet6\": %d, \"packet\": %d, \"root\": %d, \"made\": %d, \"shadow\": %d}\n",
           inet, inet6, packet, root, made, shadow);
}
"""
JS_PROBE = r"""
const fs = require("fs");
const net = require("net");
const dgram = require("dgram");
function code(action) { try { action(); return "OK"; } catch (error) { return error.code; } }
const facts = {
  root: code(() => fs.writeFileSync("/etc/passwd", "x")),
  made: code(() => fs.writeFileSync("/usr/bin/planted", "x")),
  shadow: code(() => fs.readFileSync("/etc/shadow")),
};
const udp = dgram.createSocket("udp4");
const server = net.createServer();
function report() { if ("udp" in facts && "listen" in facts) console.log(JSON.stringify(facts)); }
udp.on("error", (error) => { facts.udp = error.code; report(); });
udp.bind(0, () => { facts.udp = "OK"; udp.close(); report(); });
server.on("error", (error) => { facts.listen = error.code; report(); });
server.listen(0, "127.0.0.1", () => { facts.listen = "OK"; server.close(); report(); });
"""


def probe(engine: SyncEngine, language: str, code: str) -> Any:
    result = engine.run(code, language=language, limits=SMALL)  # type: ignore[arg-type]
    assert result.outcome is Outcome.OK, (result.outcome, result.stderr[-2000:], result.error)
    return json.loads(result.stdout)


def test_cpp_reaches_no_network_and_cannot_write_the_root(language_images: None, engine: SyncEngine) -> None:
    facts = probe(engine, "cpp", CPP_PROBE)
    assert {facts["inet"], facts["inet6"], facts["packet"]} <= REFUSED, facts
    assert facts["root"] in (errno.EROFS, errno.EACCES) and facts["made"] in (errno.EROFS, errno.EACCES), facts
    assert facts["shadow"] == errno.EACCES, facts


def test_javascript_reaches_no_network_and_cannot_write_the_root(language_images: None, engine: SyncEngine) -> None:
    facts = probe(engine, "javascript", JS_PROBE)
    refused = {errno.errorcode[number] for number in REFUSED}
    assert facts["listen"] in refused, facts
    assert facts["udp"] in refused, facts
    assert facts["root"] in ("EROFS", "EACCES") and facts["made"] in ("EROFS", "EACCES"), facts
    assert facts["shadow"] == "EACCES", facts


@pytest.mark.parametrize(
    ("language", "bomb"),
    [
        ("cpp", "#include <unistd.h>\nint main() { for (;;) fork(); }"),
        ("javascript", "const { spawn } = require('child_process');\nfor (;;) spawn('sleep', ['60']);"),
    ],
)
def test_a_fork_bomb_is_held(language_images: None, engine: SyncEngine, tier: str, language: str, bomb: str) -> None:
    started = time.monotonic()
    result = engine.run(bomb, language=language, limits=SMALL.with_time(1))  # type: ignore[arg-type]
    assert result.outcome is not Outcome.OK
    assert time.monotonic() - started < 90
    assert engine.run("print('after')").stdout == "after\n"


@pytest.mark.parametrize(
    ("language", "hungry"),
    [
        ("cpp", "#include <vector>\nint main(){std::vector<std::vector<char>> v;for(;;)v.emplace_back(1<<24,1);}"),
        ("javascript", "const kept = []; for (;;) kept.push(Buffer.alloc(1 << 24, 1));"),
    ],
)
def test_memory_is_bounded(language_images: None, engine: SyncEngine, language: str, hungry: str) -> None:
    result = engine.run(hungry, language=language, limits=SMALL)  # type: ignore[arg-type]
    assert result.outcome is Outcome.MEMORY_LIMIT, (result.outcome, result.stderr[-500:])
