"""The harness's files: the program's folder, each test's working directory, in-memory files,
and removing whatever a test left behind (standard library only)."""

from __future__ import annotations

import os
import stat
import time

from ._lean import suppress
from ._typing import TYPE_CHECKING
from .processes import hand_to_program

if TYPE_CHECKING:
    from collections.abc import Collection, Container

    # A kept file as the harness found it: inode, mode, size, modification and change times, and
    # its extended attributes.
    FileState = tuple[int, int, int, int, int, tuple[tuple[str, bytes], ...]]

# What file times are taken from on a kernel whose times are coarse (``time`` names it from 3.13 on).
CLOCK_REALTIME_COARSE = 5
# tmpfs (Linux's and gVisor's) counts a directory's entries in its size: this much when empty,
# and this much more for each entry (a link, a renamed file, a socket: any name in it).
EMPTY_DIRECTORY_SIZE = 40
ENTRY_SIZE = 20
# Whether each file system, by device, counts entries so.
_COUNTS_ENTRIES: dict[int, bool] = {}


def memory_file(name: str, data: bytes = b"") -> int:
    """An anonymous in-memory file: no path, so nothing the submission does can swap, fill or replace it."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    if data:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    return fd


def input_bytes(text: str) -> bytes:
    """A test's standard input as bytes. Text that stood for raw bytes (surrogateescape) goes back
    to those bytes; any other lone surrogate (JSON can carry one) is written as UTF-8 would."""
    try:
        return text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="surrogatepass")


class Workspace:
    """The program's folder, and the working directory each test starts in, empty."""

    def __init__(self) -> None:
        # Unique per harness process; private like tempfile.mkdtemp's, without its import cost.
        self.root = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"airlock-{os.getpid()}-{time.time_ns()}")
        os.mkdir(self.root, 0o700)
        self.program_dir = os.path.join(self.root, "program")
        os.mkdir(self.program_dir)
        self.workdir = os.path.join(self.root, "work")
        for path in (self.root, self.program_dir):
            hand_to_program(path)
        self._kept: set[str] = set()
        # What the program's folder held when the tests began (see ``seal``); None before.
        self._sealed: tuple[tuple[int, ...], dict[str, FileState]] | None = None

    def write_program(self, name: str, text: str) -> str:
        """Write the program's source as ``name`` in its folder; return its path."""
        path = os.path.join(self.program_dir, name)
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as source:
            source.write(text)
        hand_to_program(path)
        self._kept.add(name)
        return path

    def keep(self, name: str) -> None:
        """Keep ``name`` in the program's folder between tests (what a compiler built)."""
        self._kept.add(name)

    @property
    def sealed(self) -> bool:
        return self._sealed is not None

    def seal(self) -> None:
        """Take what the program's folder holds now (its source, its files, what the compiler
        made) as what every test starts from: ``changed`` then tells whether a test changed it.

        The program owns these files (it runs as the harness's user, or is handed them), so
        nothing stops a test from writing them, linking them, replacing them, or setting their
        extended attributes, all to leave state for the next test. Each of those changes a
        file's change time, which no process can set. A kernel whose file times are coarse gives
        every change within one clock tick the same time: there the tests begin only once the
        clock is past the tick of the newest change here (up to 4 ms later, once per container),
        so a change during a test gets a later time.
        """
        self._sealed = self._state()
        if _fine_file_times(self.program_dir):
            return
        _, files = self._sealed
        newest = max((state[4] for state in files.values()), default=0)
        while time.clock_gettime_ns(CLOCK_REALTIME_COARSE) <= newest:
            time.sleep(0.001)

    def changed(self) -> bool:
        """Whether the program's folder differs from what ``seal`` found: a kept file changed
        (its content, mode, times, links or attributes), went, or was replaced; or a folder was."""
        return self._sealed is not None and self._state() != self._sealed

    def _state(self) -> tuple[tuple[int, ...], dict[str, FileState]]:
        """Which directories the two folders are (``scrub`` resets the rest of them: entries come
        and go with every test), and the state of each kept file."""
        folders = []
        for path in (self.root, self.program_dir):
            with suppress(OSError):
                folders.append(os.lstat(path).st_ino)
        files: dict[str, FileState] = {}
        for name in self._kept:
            path = os.path.join(self.program_dir, name)
            with suppress(OSError):
                found = os.lstat(path)
                # gVisor keeps a file's change time when an attribute is set: they count themselves.
                attributes = _attributes(path)
                files[name] = (
                    found.st_ino,
                    found.st_mode,
                    found.st_size,
                    found.st_mtime_ns,
                    found.st_ctime_ns,
                    attributes,
                )
        return tuple(folders), files

    def fresh_workdir(self) -> str:
        """An empty working directory for the next test."""
        # The scrub removed the last one; whatever stands in its place now (a process of the
        # program may have put a link there) goes, and a new directory is made.
        if not os.path.isdir(self.root):
            os.mkdir(self.root, 0o700)
            hand_to_program(self.root)
        remove_tree(self.workdir)
        os.mkdir(self.workdir, 0o700)
        hand_to_program(self.workdir)
        return self.workdir

    def place_files(self, files: dict[str, str]) -> None:
        """Write a test's files (a checker's input, output and answer) into its working directory."""
        for name, text in files.items():
            _write_new(self.workdir, name, text)

    def add_program_files(self, files: dict[str, str]) -> None:
        """Write more of the program's files beside its source, kept between tests."""
        for name, text in files.items():
            _write_new(self.program_dir, name, text)
            self._kept.add(name)

    def scrub(self, *, everything_writable: bool) -> None:
        """Remove what the last test left, so that the next one starts clean.

        That is its working directory (also its HOME and TMPDIR); and, inside the sandbox
        (``everything_writable``: every writable place is ours), the rest of /tmp and /dev/shm.
        No IPC object can outlive a test: our seccomp profile refuses System V IPC and POSIX
        message queues, which no runtime lets us list and remove everywhere.
        """
        remove_tree(self.workdir)
        if not everything_writable:
            return
        for folder in (self.root, self.program_dir):
            _reset_folder(folder)
        clear_directory(os.path.dirname(self.root), keep={os.path.basename(self.root)})
        clear_directory(self.root, keep={os.path.basename(self.program_dir)})
        clear_directory(self.program_dir, keep=self._kept)
        clear_directory("/dev/shm")

    def close(self) -> None:
        remove_tree(self.root)


def _fine_file_times(folder: str) -> bool:
    """Whether the file system of ``folder`` gives each change a time of its own, however soon it
    follows the last (Linux's tmpfs from 6.13 on, for a file whose time was read), as tried on a
    file of our own without a name. Coarse times come in whole clock ticks: two changes a tick
    apart or none, never closer."""
    tick = time.clock_getres(CLOCK_REALTIME_COARSE) * 1e9
    try:
        fd = os.open(folder, os.O_TMPFILE | os.O_WRONLY, 0o600)
    except OSError:
        return False
    try:
        for _ in range(3):  # a tick may fall between two changes
            os.write(fd, b".")
            before = os.fstat(fd).st_ctime_ns
            os.write(fd, b".")
            if 0 < os.fstat(fd).st_ctime_ns - before < tick / 2:
                return True
        return False
    finally:
        os.close(fd)


def _attributes(path: str) -> tuple[tuple[str, bytes], ...]:
    """A file's extended attributes (a link's own), names and values."""
    try:
        return tuple(
            (name, os.getxattr(path, name, follow_symlinks=False)) for name in os.listxattr(path, follow_symlinks=False)
        )
    except OSError:
        return ()


def _reset_folder(path: str) -> None:
    """A folder of ours that the program owns, back to how the harness made it: the mode, no
    extended attributes (access lists among them), and times the program did not choose (each
    could carry a previous test's state). Through a descriptor: a link in its place is not followed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        with suppress(OSError):
            os.chmod(fd, 0o700)
        with suppress(OSError):
            for name in os.listxattr(fd):
                # What the program cannot set (a security module's label) it cannot remove either.
                with suppress(OSError):
                    os.removexattr(fd, name)
        with suppress(OSError):
            os.utime(fd, ns=(0, 0))
    finally:
        os.close(fd)


def clear_directory(path: str, keep: Collection[str] = ()) -> None:
    """Delete everything inside ``path`` except the names in ``keep``, however the program left
    it: any depth, any modes, any names.

    It walks through directory descriptors, one open at a time (down by name, back up by
    ``..``), so a chain of directories deeper than ``PATH_MAX`` goes like any other, and the
    open-files limit is never in the way. Nothing else runs meanwhile (the program's processes
    are gone), and the scratch file systems bound the number of entries.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    if _holds_only(fd, keep):
        os.close(fd)
        return
    pending = [_unlink_files(fd, keep)]
    depth: list[str] = []
    try:
        while pending:
            if pending[-1]:
                name = pending[-1].pop()
                with suppress(OSError):
                    os.chmod(name, 0o700, dir_fd=fd)
                try:
                    child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError:
                    continue
                os.close(fd)
                fd = child
                depth.append(name)
                pending.append(_unlink_files(fd))
                continue
            pending.pop()
            if depth:
                parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = parent
                with suppress(OSError):
                    os.rmdir(depth.pop(), dir_fd=fd)
    finally:
        os.close(fd)


def _holds_only(fd: int, keep: Collection[str]) -> bool:
    """Whether the directory open as ``fd`` holds nothing but names in ``keep``, told by its size
    alone where its file system counts entries in it (reading a directory takes about ten system
    calls, and most tests leave the scratch places as they found them)."""
    info = os.fstat(fd)
    if info.st_dev not in _COUNTS_ENTRIES:
        _COUNTS_ENTRIES[info.st_dev] = _counts_entries(fd)
        info = os.fstat(fd)
    if not _COUNTS_ENTRIES[info.st_dev]:
        return False
    kept = 0
    for name in keep:
        with suppress(OSError):
            os.lstat(name, dir_fd=fd)
            kept += 1
    return info.st_size == EMPTY_DIRECTORY_SIZE + ENTRY_SIZE * kept


def _counts_entries(fd: int) -> bool:
    """Whether the file system of the directory open as ``fd`` counts entries in a directory's
    size, as tried on a directory of our own made in it."""
    probe = f".airlock-probe-{os.getpid()}"
    try:
        os.mkdir(probe, 0o700, dir_fd=fd)
    except OSError:
        return False
    try:
        empty = os.lstat(probe, dir_fd=fd).st_size
        os.mkdir(f"{probe}/entry", dir_fd=fd)
        return empty == EMPTY_DIRECTORY_SIZE and os.lstat(probe, dir_fd=fd).st_size == EMPTY_DIRECTORY_SIZE + ENTRY_SIZE
    except OSError:
        return False
    finally:
        with suppress(OSError):
            os.rmdir(f"{probe}/entry", dir_fd=fd)
        with suppress(OSError):
            os.rmdir(probe, dir_fd=fd)


def _unlink_files(fd: int, keep: Container[str] = ()) -> list[str]:
    """Unlink every non-directory in the directory open as ``fd``; return its subdirectories."""
    subdirectories = []
    with suppress(OSError), os.scandir(fd) as entries:
        for entry in entries:
            if entry.name in keep:
                continue
            try:
                is_directory = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_directory = False
            if is_directory:
                subdirectories.append(entry.name)
            else:
                with suppress(OSError):
                    os.unlink(entry.name, dir_fd=fd)
    return subdirectories


def remove_tree(path: str) -> None:
    """Delete ``path`` (a file, a link or a whole directory tree)."""
    try:
        info = os.lstat(path)
    except OSError:
        return
    if stat.S_ISDIR(info.st_mode):
        clear_directory(path)
        with suppress(OSError):
            os.rmdir(path)
    else:
        with suppress(OSError):
            os.unlink(path)


def _write_new(folder: str, name: str, text: str) -> None:
    """Write ``text`` as a new file ``name`` (a plain name, never one that exists) in ``folder``."""
    if not isinstance(text, str) or os.path.basename(name) != name or name in ("", ".", ".."):
        raise ValueError(f"a file must have a plain name and text: {name!r}")
    path = os.path.join(folder, name)
    with open(path, "xb") as file:
        file.write(input_bytes(text))
    hand_to_program(path)
