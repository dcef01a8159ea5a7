"""Static properties of seccomp/airlock.json (the behaviour is proved in tests/integration)."""

from __future__ import annotations

from engine.runtime._seccomp import _with_loopback, profile

DENIED = {
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "modify_ldt",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kcmp",
    "pidfd_getfd",
    "process_madvise",
    "name_to_handle_at",
    "open_by_handle_at",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "mount",
    "umount2",
    "unshare",
    "setns",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "init_module",
    "finit_module",
    "delete_module",
    "chroot",
    "pivot_root",
    "socketcall",
    "settimeofday",
    "clock_settime",
    "syslog",
    "iopl",
    "ioperm",
    "reboot",
    "swapon",
    "acct",
}


def _allowed() -> set[str]:
    return {name for rule in profile()["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" for name in rule["names"]}


def test_denies_by_default() -> None:
    assert profile()["defaultAction"] == "SCMP_ACT_ERRNO"


def test_native_architectures_only() -> None:
    assert all(not entry["subArchitectures"] for entry in profile()["archMap"])


def test_dangerous_syscalls_are_not_allowed() -> None:
    assert _allowed() & DENIED == set()


def test_no_rule_depends_on_capabilities() -> None:
    for rule in profile()["syscalls"]:
        assert "caps" not in rule.get("includes", {}) and "caps" not in rule.get("excludes", {}), rule["names"]


def test_socket_is_allowed_for_unix_only() -> None:
    rules = [rule for rule in profile()["syscalls"] if "socket" in rule["names"]]
    allow = [rule for rule in rules if rule["action"] == "SCMP_ACT_ALLOW"]
    assert [rule["args"] for rule in allow] == [[{"index": 0, "value": 1, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]]
    refuse = [rule for rule in rules if rule["action"] == "SCMP_ACT_ERRNO"]
    assert refuse and all(rule["errnoRet"] == 97 for rule in refuse)


def test_removed_features_answer_enosys() -> None:
    enosys = {name for rule in profile()["syscalls"] if rule.get("errnoRet") == 38 for name in rule["names"]}
    assert {"clone3", "io_uring_setup", "io_uring_enter", "io_uring_register"} <= enosys


def _matches(argument: dict[str, int | str], value: int) -> bool:
    op, datum, datum_two = argument["op"], int(argument["value"]), int(argument["valueTwo"])
    return {
        "SCMP_CMP_EQ": value == datum,
        "SCMP_CMP_NE": value != datum,
        "SCMP_CMP_GT": value > datum,
        "SCMP_CMP_MASKED_EQ": value & datum == datum_two,
    }[str(op)]


def test_a_sandboxs_sockets_are_unix_and_loopback_inet_only_each_family_decided_by_one_rule() -> None:
    """A long-lived sandbox's profile: AF_UNIX, AF_INET, AF_INET6 made; every other family, any
    value of the 64-bit register, refused with EAFNOSUPPORT by exactly one rule (rules that
    overlap would leave the choice to libseccomp's order)."""
    rules = [rule for rule in _with_loopback(profile())["syscalls"] if "socket" in rule["names"]]
    assert all(rule["names"] == ["socket"] and len(rule["args"]) == 1 for rule in rules)
    for value in [*range(300), 2**31 - 1, 2**31, 2**32 + 1, 2**32 + 2, 2**32 + 10, 2**63, 2**64 - 1]:
        matching = [rule for rule in rules if _matches(rule["args"][0], value)]
        assert len(matching) == 1, (value, matching)
        (rule,) = matching
        assert (rule["action"] == "SCMP_ACT_ALLOW") is (value in (1, 2, 10)), value
        assert rule["action"] == "SCMP_ACT_ALLOW" or rule["errnoRet"] == 97
    # Nothing else changes.
    others = [rule for rule in _with_loopback(profile())["syscalls"] if "socket" not in rule["names"]]
    assert others == [rule for rule in profile()["syscalls"] if "socket" not in rule["names"]]
