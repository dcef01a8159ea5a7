"""``airlock doctor``: is everything the engine promises actually in force on this machine?"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict

from ._engine import Engine
from ._errors import EngineError
from ._limits import Limits
from ._models import Outcome
from ._settings import Settings

__all__ = ["Check", "run_checks"]

PROBE_LIMITS = Limits(time_s=10, memory_mb=128, pids=48, cpus=0.5, tmpfs_mb=8, shm_mb=4)

_FACTS_PROBE = r"""
import json, os, socket
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    inet = "allowed"
except OSError as exc:
    inet = exc.errno
read = lambda p: open(p).read().strip()
print(json.dumps({
    "seccomp": status["Seccomp"].strip(), "inet": inet, "uid": os.getuid(), "caps": status["CapEff"].strip(),
    "interfaces": sorted(os.listdir("/sys/class/net")),
    "memory": int(read("/sys/fs/cgroup/memory/memory.limit_in_bytes")) if os.path.exists("/sys/fs/cgroup/memory")
              else int(read("/sys/fs/cgroup/memory.max")),
    "cpu": read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") if os.path.exists("/sys/fs/cgroup/cpu")
           else read("/sys/fs/cgroup/cpu.max").split()[0],
    "delayacct": read("/proc/sys/kernel/task_delayacct") if os.path.exists("/proc/sys/kernel/task_delayacct") else "",
}))
"""
_PIDS_PROBE = """
import os, time
count = 0
for _ in range(500):
    try:
        if os.fork() == 0:
            time.sleep(20)
            os._exit(0)
        count += 1
    except OSError:
        break
print(count)
"""
_MEMORY_PROBE = "blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))\n"


class Check(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    ok: bool
    detail: str
    optional: bool = False


async def run_checks(settings: Settings) -> list[Check]:
    checks: list[Check] = []
    try:
        engine = Engine(settings, limits=PROBE_LIMITS)
        await engine.__aenter__()
    except EngineError as exc:
        return [Check(name="container engine answers", ok=False, detail=str(exc))]
    try:
        info = engine.info
        cgroup = f", cgroup v{info.cgroup_version}" if info.cgroup_version else ""
        checks.append(Check(name="container engine answers", ok=True, detail=f"{info.version}{cgroup}"))
        try:
            image = await engine.image_for("python")
            checks.append(Check(name="python image built", ok=True, detail=image))
        except EngineError as exc:
            checks.append(Check(name="python image built", ok=False, detail=str(exc)))
            return checks
        checks.extend(await _isolation_checks(engine))
        if settings.runtime == "docker":
            runsc = "gvisor" in info.isolations
            checks.append(
                Check(
                    name="gVisor (runsc) registered",
                    ok=runsc,
                    optional=True,
                    detail="available" if runsc else "not registered (optional: scripts/setup --with-gvisor)",
                )
            )
    finally:
        await engine.__aexit__(None, None, None)
    return checks


async def _isolation_checks(engine: Engine) -> list[Check]:
    checks = []
    result = await engine.run(_FACTS_PROBE)
    if result.outcome is not Outcome.OK:
        detail = f"probe ended with {result.outcome}: {result.stderr.strip() or result.error}"
        return [Check(name="sandbox runs a probe", ok=False, detail=detail)]
    facts = json.loads(result.stdout)
    checks.append(
        Check(
            name="seccomp profile applied",
            ok=facts["seccomp"] == "2" and facts["inet"] == 97,
            detail=f"filter mode {facts['seccomp']}, AF_INET socket -> {facts['inet']} (97 = refused)",
        )
    )
    settings = engine.settings
    own_uid = settings.sandbox_uid_first <= facts["uid"] < settings.sandbox_uid_first + settings.sandbox_uid_count
    checks.append(
        Check(
            name="unprivileged, no capabilities, a uid of its own",
            ok=facts["uid"] != 0 and own_uid and int(facts["caps"], 16) == 0,
            detail=f"uid {facts['uid']} (the sandbox range starts at {settings.sandbox_uid_first}), "
            f"effective capabilities {facts['caps']}",
        )
    )
    checks.append(
        Check(
            name="network off", ok=facts["interfaces"] == ["lo"], detail=f"interfaces: {', '.join(facts['interfaces'])}"
        )
    )
    memory_ok = facts["memory"] == PROBE_LIMITS.memory_mb * 2**20
    bomb = await engine.run(_MEMORY_PROBE)
    checks.append(
        Check(
            name="memory limit enforced",
            ok=memory_ok and bomb.outcome is Outcome.MEMORY_LIMIT,
            detail=f"cgroup limit {facts['memory'] // 2**20} MiB; memory bomb -> {bomb.outcome}",
        )
    )
    forks = await engine.run(_PIDS_PROBE)
    forked = int(forks.stdout or -1)
    checks.append(
        Check(
            name="pids limit enforced",
            ok=0 < forked < PROBE_LIMITS.pids,
            detail=f"forks before refusal: {forked} (limit {PROBE_LIMITS.pids})",
        )
    )
    quota = int(facts["cpu"]) if facts["cpu"].lstrip("-").isdigit() else -1
    checks.append(
        Check(
            name="CPU quota enforced",
            ok=quota > 0,
            detail=f"CFS quota {quota} us per period for {PROBE_LIMITS.cpus} CPU",
        )
    )
    delay_accounting = facts["delayacct"] == "1"
    checks.append(
        Check(
            name="a busy disk's waits given back (delay accounting)",
            ok=delay_accounting,
            optional=True,
            detail="kernel.task_delayacct is on"
            if delay_accounting
            else "kernel.task_delayacct is off: a program that waits for a busy disk (its own binary's pages) "
            "can reach the wall-clock backstop; sysctl -w kernel.task_delayacct=1 (scripts/setup does)",
        )
    )
    return checks
