"""What the attack suites try, shared by the job attacks (security/test_attacks.py) and the
attacks by a sandbox's root (security/test_sandbox_root.py)."""

from __future__ import annotations

# A ``call(number, *args)`` helper for raw syscalls: the errno's name, or "OK".
SYSCALL = """
import ctypes, errno, json
libc = ctypes.CDLL(None, use_errno=True)
def call(number, *args):
    ctypes.set_errno(0)
    result = libc.syscall(number, *[ctypes.c_long(a) for a in args])
    return errno.errorcode.get(ctypes.get_errno(), "OK") if result == -1 else "OK"
"""

# Address families a program could reach the host, the network or the kernel's internals through.
SOCKET_FAMILIES = {
    "inet": (2, 1),
    "inet6": (10, 1),
    "raw": (2, 3),
    "packet": (17, 3),
    "netlink": (16, 3),
    "vsock": (40, 1),
    "alg": (38, 5),
    "key": (15, 3),
}

# One program tries them all: a call that got through fails the test whatever follows it.
DANGEROUS_SYSCALLS: list[tuple[str, int, tuple[int, ...]]] = [
    ("ptrace_attach_init", 101, (16, 1, 0, 0)),
    ("process_vm_readv", 310, (1, 0, 1, 0, 1, 0)),
    ("mount", 165, (0, 0, 0, 0, 0)),
    ("umount2", 166, (0, 0)),
    ("unshare_user", 272, (0x10000000,)),
    ("unshare_net", 272, (0x40000000,)),
    ("clone_newuser", 56, (0x10000000 | 17, 0, 0, 0, 0)),
    ("setns", 308, (0, 0)),
    ("bpf", 321, (0, 0, 0)),
    ("perf_event_open", 298, (0, 0, -1, -1, 0)),
    ("userfaultfd", 323, (0,)),
    ("io_uring_setup", 425, (1, 0)),
    ("keyctl", 250, (0, 0, 0, 0, 0)),
    ("add_key", 248, (0, 0, 0, 0, 0)),
    ("kexec_load", 246, (0, 0, 0, 0)),
    ("init_module", 175, (0, 0, 0)),
    ("finit_module", 313, (0, 0, 0)),
    ("delete_module", 176, (0, 0)),
    ("settimeofday", 164, (0, 0)),
    ("clock_settime", 227, (0, 0)),
    ("adjtimex_set", 159, (0,)),
    ("personality_no_aslr", 135, (0x0040000,)),
    ("modify_ldt", 154, (0, 0, 0)),
    ("iopl", 172, (3,)),
    ("chroot", 161, (0,)),
    ("pivot_root", 155, (0, 0)),
    ("swapon", 167, (0, 0)),
    ("reboot", 169, (0, 0, 0, 0)),
    ("acct", 163, (0,)),
    ("name_to_handle_at", 303, (0, 0, 0, 0, 0)),
    ("open_by_handle_at", 304, (0, 0, 0)),
    ("fanotify_init", 300, (0, 0)),
    ("lookup_dcookie", 212, (0, 0, 0)),
]
