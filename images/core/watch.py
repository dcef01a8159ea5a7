"""Reports file system events under one directory of a sandbox, one JSON line each.

Run by the engine as the sandbox's user: ``python3 -I -S watch.py PATH [--recursive]``. Its
first line, ``{"ready": true}``, comes once every watch is in place, so an event caused after
it is never missed. Events are named as fsnotify (which E2B's envd uses) names them, by a path
relative to PATH. When PATH cannot be watched it exits 100 + the errno that says why; it exits 0
when PATH itself goes away.
"""

import ctypes
import errno
import json
import os
import struct
import sys

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_IGNORED = 0x8000
IN_ISDIR = 0x40000000
IN_ONLYDIR = 0x01000000
IN_CLOEXEC = 0o2000000
WATCHED = IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
# fsnotify's mapping of inotify's bits to its five operations, in its order.
OPERATIONS = (
    (IN_CREATE | IN_MOVED_TO, "create"),
    (IN_MODIFY, "write"),
    (IN_DELETE | IN_DELETE_SELF, "remove"),
    (IN_MOVED_FROM | IN_MOVE_SELF, "rename"),
    (IN_ATTRIB, "chmod"),
)
HEADER = struct.Struct("iIII")
EXIT_BASE = 100


def main() -> None:
    root = os.fsencode(sys.argv[1])
    recursive = "--recursive" in sys.argv[2:]
    if not os.path.exists(root):
        sys.exit(EXIT_BASE + errno.ENOENT)
    if not os.path.isdir(root):
        sys.exit(EXIT_BASE + errno.ENOTDIR)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(IN_CLOEXEC)
    if fd < 0:
        sys.exit(EXIT_BASE + ctypes.get_errno())
    directories: dict[int, bytes] = {}
    out: list[str] = []

    def watch(path: bytes) -> bool:
        wd = libc.inotify_add_watch(fd, path, WATCHED | IN_ONLYDIR)
        if wd < 0:
            return False
        directories[wd] = path
        return True

    def watch_tree(path: bytes, report: bool) -> None:
        """Watch ``path`` and the directories below it; with ``report``, announce what is
        already there (it may have been made before its directory was watched)."""
        if not watch(path):
            return
        try:
            children = list(os.scandir(path))
        except OSError:
            return
        for child in children:
            if report:
                emit(child.path, "create")
            if child.is_dir(follow_symlinks=False):
                watch_tree(child.path, report)

    def emit(path: bytes, operation: str) -> None:
        name = os.fsdecode(os.path.relpath(path, root))
        out.append(json.dumps({"name": name, "type": operation}) + "\n")

    if recursive:
        watch_tree(root, False)
    else:
        watch(root)
    if not directories:
        sys.exit(EXIT_BASE + ctypes.get_errno())
    out.append('{"ready": true}\n')
    while True:
        sys.stdout.write("".join(out))
        sys.stdout.flush()
        out.clear()
        data = os.read(fd, 1 << 16)
        at = 0
        while at < len(data):
            wd, mask, _cookie, length = HEADER.unpack_from(data, at)
            name = data[at + HEADER.size : at + HEADER.size + length].rstrip(b"\0")
            at += HEADER.size + length
            directory = directories.get(wd)
            if directory is None:
                continue
            if mask & IN_IGNORED:
                del directories[wd]
                if directory == root:
                    sys.stdout.write("".join(out))
                    return
                continue
            if not name and directory != root:
                # A subdirectory's own removal or move is reported by its parent's watch.
                continue
            path = os.path.join(directory, name) if name else directory
            for bits, operation in OPERATIONS:
                if mask & bits:
                    emit(path, operation)
            if recursive and mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO):
                watch_tree(path, True)


if __name__ == "__main__":
    main()
