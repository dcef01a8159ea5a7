"""A long-lived sandbox: one hardened container kept alive to run commands and hold files.

Every command leads a session of its own (the container engine starts each one so), and a
signal goes to that session's process group, so that it reaches the command and what it
started. A wrapper prints the command's pid before it becomes the command, which is why the
first line of a command's stdout is trusted. Files move
through commands too (``cat`` in, ``cat`` out, streamed without a cap): Docker's archive API can
neither write to a read-only root nor see into a tmpfs.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import enum
import errno
import os
import posixpath
import secrets
import signal as signals
import time
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterator, Mapping, Sequence

import anyio
from anyio import AsyncFile
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import BaseModel, ConfigDict, Field

from .._errors import ContextNotFound, EngineError, SandboxError, SandboxLimitReached
from .._limits import Limits
from .._models import Language, Outcome, RunResult
from ..runtime import BackgroundTasks, ContainerRef, ContainerUsage, OutputStream, Runtime, Spawned
from ..runtime._policy import SANDBOX_ROOT, SANDBOX_SCRATCH_PLACES, SANDBOX_USER, SANDBOX_USER_HOME
from ._interpreter import CellEvent, CodeContext
from ._watch import MAX_WATCHERS, WATCH_SCRIPT, Watcher

__all__ = ["Command", "Entry", "EntryType", "Exit", "Metrics", "Output", "Process", "Sandbox", "TerminalSize"]

# Prints its pid, then becomes the command ("$0" "$@") as the leader of a session of its own, so
# that a signal reaches everything it starts. runc starts each exec in a new session, crun in
# crun's: there setsid(1) makes one, without forking (it forks only a group's leader).
PID_WRAPPER = ("sh", "-c", 'echo "$$"; kill -0 -"$$" 2>/dev/null && exec "$0" "$@"; exec setsid "$0" "$@"')
# Every process of the session, once each (a shell on a terminal puts its jobs in groups of their
# own; the session is the 4th field after the name in /proc/PID/stat); where none is found, the
# group, or the process alone where it left its group. Once: a second SIGINT would interrupt the
# interpreter's handling of the first.
KILL_SCRIPT = r"""sig=$0 sid=$1 found=
for stat in /proc/[0-9]*/stat; do
  read -r line 2>/dev/null < "$stat" || continue
  set -- ${line##*) }
  if [ "$4" = "$sid" ]; then found=1; pid=${stat#/proc/}; kill -"$sig" "${pid%/stat}" 2>/dev/null; fi
done
[ -n "$found" ] || kill -"$sig" -"$sid" 2>/dev/null || kill -"$sig" "$sid"
"""
# Holds every process of the sandbox stopped until its stdin ends, then lets them go on: every
# process but the container's own (its init and idle command, in the session of pid 1, which no
# command can join: each one starts a session of its own). It says "stopped" once each shows as
# stopped, after as many rounds of stops as it takes (at most $1: then it names those left, lets
# all go on and fails); "kill" on stdin then ends them all ("ended"). It forks nothing, and the
# last signal is its own: a fork bomb's stopped processes may hold every pid, and then nothing
# else could start in the sandbox to let them go on.
HOLD_SCRIPT = r"""rounds=$1 signalled=" "
read -r line < /proc/1/stat; set -- ${line##*) }; own=$4
# Sends signal $1 to each process until each is in a state $2 matches (empty: one pass).
signal_all() {
  left=$rounds
  while [ "$left" -gt 0 ]; do
    left=$((left - 1)) unsettled=
    for stat in /proc/[0-9]*/stat; do
      read -r line 2>/dev/null < "$stat" || continue
      set -- "$1" "$2" ${line##*) }
      pid=${stat#/proc/}; pid=${pid%/stat}
      [ "$6" = "$own" ] || [ "$3" = Z ] || [ "$pid" = "$$" ] && continue
      case "$3" in $2) continue ;; esac
      # One in uninterruptible sleep that was sent the signal takes it before it runs code of
      # its own. A parent waiting for the child it made with vfork (as dash and posix_spawn do)
      # sleeps so until the child starts its program: with the child stopped first, it would
      # never show as stopped.
      [ "$3" = D ] && case $signalled in *" $1:$pid "*) continue ;; esac
      kill -"$1" "$pid" 2>/dev/null && unsettled="$unsettled $pid($3)" signalled="$signalled$1:$pid "
    done
    [ -n "$unsettled" ] && [ -n "$2" ] || return 0
  done
  echo "still running after $rounds rounds:$unsettled" >&2
  return 1
}
signal_all 19 "[Tt]" || { signal_all 18 ""; exit 1; }
echo stopped
while read -r command; do
  [ "$command" = kill ] && signal_all 9 Z && echo ended
done
signal_all 18 ""
"""

# Unpacks a pause's archive from stdin. The sandbox's user is a uid leased to each container, so
# what was the old one's is the new one's; root's stays root's (as root, where the sandbox has
# one; as the user, everything is the user's anyway). Directories get their modes and times last,
# so that a read-only one still receives what it holds; links their times too, which tarfile skips.
RESTORE_SCRIPT = r"""import os, sys, tarfile
user = os.stat("/home/user").st_uid
links = []
def members(archive):
    for member in archive:
        member.uid = 0 if member.uid == 0 else user
        member.gid = 0 if member.gid == 0 else user
        if member.issym():
            links.append(member)
        yield member
trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as archive:
    archive.extractall("/", members=members(archive), numeric_owner=True, **trusted)
for link in links:
    os.utime("/" + link.name, (link.mtime, link.mtime), follow_symlinks=False)
"""

# One format for every file system answer: eight NUL-terminated fields per entry.
ENTRY_FORMAT = r"%y\0%s\0%m\0%u\0%g\0%T@\0%l\0%p\0"
ENTRY_FIELDS = 8
# Trusted, fixed code run as the sandbox's user, given the format as $0; the exit status says
# what went wrong.
FILES_SCRIPT = r"""
fmt=$0
op=$1; shift
case $op in
stat) [ -e "$1" ] || [ -L "$1" ] || exit 102; exec find "$1" -maxdepth 0 -printf "$fmt" ;;
list) [ -e "$1" ] || exit 102; [ -d "$1" ] || exit 120; exec find "$1" -mindepth 1 -maxdepth "$2" -printf "$fmt" ;;
mkdir) [ -e "$1" ] && exit 117; mkdir -p -- "$1" && exec find "$1" -maxdepth 0 -printf "$fmt" ;;
move) [ -e "$1" ] || [ -L "$1" ] || exit 102
      mkdir -p -- "$(dirname -- "$2")" && mv -T -- "$1" "$2" && exec find "$2" -maxdepth 0 -printf "$fmt" ;;
remove) [ -e "$1" ] || [ -L "$1" ] || exit 102; exec rm -rf -- "$1" ;;
read) [ -e "$1" ] || exit 102; [ -d "$1" ] && exit 121; exec cat -- "$1" ;;
write) [ -d "$1" ] && exit 121; mkdir -p -- "$(dirname -- "$1")" && exec cat > "$1" ;;
esac
exit 64
"""
# The script exits with 100 + the errno it stands for.
ERRNO_EXIT_BASE = 100
FILE_ERRORS: dict[int, type[OSError]] = {
    errno.ENOENT: FileNotFoundError,
    errno.EEXIST: FileExistsError,
    errno.ENOTDIR: NotADirectoryError,
    errno.EISDIR: IsADirectoryError,
    errno.EACCES: PermissionError,
}
# Code contexts a sandbox may hold at once (the host keeps each; their kernels are the sandbox's).
MAX_CONTEXTS = 32
# How long a killed command may take to end before its sandbox is ended instead.
KILL_GRACE_S = 5.0
# Starts of a command whose exec ended before anything ran (see ``Sandbox.start``).
COMMAND_START_TRIES = 3
# Inside a sandbox: connect to a port on its loopback (IPv4, else IPv6: a sandbox has no
# /etc/hosts to name "localhost"), say so, then pass stdin to the socket and the socket to stdout.
# bash's /dev/tcp and two cats start in a few milliseconds, where a Python took tens. A background
# command's stdin is /dev/null unless the shell's own is handed to it on another descriptor.
PORT_CONNECTED = b"+"
PORT_RELAY = """
{ exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || { exec 3<>"/dev/tcp/::1/$1"; } 2>/dev/null || exit 1
exec 4<&0
printf +
cat <&4 >&3 &
cat <&3
kill $! 2>/dev/null
"""
PYTHON_ISOLATED = ("python3", "-I", "-S")
# Chunks a subscriber may fall behind by before the command waits for it (as a pipe would).
SUBSCRIBER_BUFFER = 64
# A terminal's rows and columns, each: the kernel keeps them as 16-bit numbers.
MAX_TERMINAL_SIDE = 65535
# Samples of a sandbox's metrics kept for asking later (E2B's get_metrics returns a series).
MAX_METRICS_SAMPLES = 1024
# A pause to disk: room for tar's headers beyond twice the files' bytes, how long tar may take
# either way, and the pieces an archive is read back in.
ARCHIVE_HEADROOM_BYTES = 64 << 20
ARCHIVE_TIME_S = 300.0
ARCHIVE_CHUNK_BYTES = 1 << 20
PROCESSES_END_S = 5.0
# Stopping every process: rounds of stops before giving up (a round with none left to stop ends
# it), and how long the holder may take to answer or to end.
HOLD_ROUNDS = 200
HOLD_TIME_S = 60.0


class TerminalSize(BaseModel):
    """A pseudo-terminal's size, in characters."""

    model_config = ConfigDict(frozen=True)

    rows: int = Field(ge=1, le=MAX_TERMINAL_SIDE)
    cols: int = Field(ge=1, le=MAX_TERMINAL_SIDE)


class Command(BaseModel):
    """What a process was started as."""

    model_config = ConfigDict(frozen=True)

    argv: tuple[str, ...]
    cwd: str = SANDBOX_USER_HOME
    env: Mapping[str, str] = Field(default_factory=dict)
    tag: str | None = None
    terminal: TerminalSize | None = Field(None, description="started on a pseudo-terminal of this size")
    user: str = Field(SANDBOX_USER, description="who it runs as: the sandbox's user or its root")


class Output(BaseModel):
    """A chunk of a process's output, as it came."""

    model_config = ConfigDict(frozen=True)

    stream: OutputStream
    data: bytes


class PortRefused(SandboxError):
    """Nothing in the sandbox listens on the port asked for."""


class PortStream:
    """Bytes to and from a port in a sandbox (:meth:`Sandbox.connect_port`)."""

    def __init__(self, relay: Process, output: MemoryObjectReceiveStream[Output], pending: bytes) -> None:
        self._relay = relay
        self._output = output
        self._pending = pending

    async def send(self, data: bytes) -> None:
        await self._relay.send_stdin(data)

    async def receive(self) -> bytes:
        """What came back next; ``b""`` once the other side closed."""
        if self._pending:
            pending, self._pending = self._pending, b""
            return pending
        async for chunk in self._output:
            if chunk.stream == "stdout" and chunk.data:
                return chunk.data
        return b""


class Exit(BaseModel):
    """How a process ended."""

    model_config = ConfigDict(frozen=True)

    exit_code: int | None = Field(description="None when the container engine lost track of it")
    signal: int | None = Field(None, description="the signal that ended it, when one did")
    timed_out: bool = False

    @property
    def status(self) -> str:
        if self.signal is not None:
            # As Go words it (E2B's envd is written in Go): "signal: killed".
            return f"signal: {(signals.strsignal(self.signal) or str(self.signal)).lower()}"
        return f"exit status {self.exit_code}"


class EntryType(enum.StrEnum):
    FILE = "file"
    DIRECTORY = "directory"
    SYMLINK = "symlink"
    OTHER = "other"


class Entry(BaseModel):
    """One file system entry in a sandbox."""

    model_config = ConfigDict(frozen=True)

    path: str
    type: EntryType
    size: int
    mode: int = Field(description="permission bits")
    owner: str
    group: str
    modified: datetime.datetime
    symlink_target: str | None = None

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def permissions(self) -> str:
        kind = {EntryType.DIRECTORY: "d", EntryType.SYMLINK: "l"}.get(self.type, "-")
        bits = "".join(char if self.mode & (1 << (8 - i)) else "-" for i, char in enumerate("rwxrwxrwx"))
        return kind + bits


class Metrics(BaseModel):
    """One sample of a sandbox's use of what its limits give it, named as E2B names them."""

    model_config = ConfigDict(frozen=True)

    timestamp: datetime.datetime
    cpu_count: int = Field(description="the CPUs it may use, rounded (at least 1)")
    cpu_used_pct: float = Field(description="its CPU time since the sample before, in % of what its CPUs allow")
    cpu_s: float = Field(description="its CPU time since it started")
    mem_used: int = Field(description="bytes of memory in use, without the page cache it could drop")
    mem_total: int = Field(description="its memory limit in bytes")
    mem_cache: int = Field(description="its page cache in bytes")
    disk_used: int = Field(description="bytes written to its writable file systems (all in memory)")
    disk_total: int = Field(description="the size of those file systems in bytes")


class Process:
    """A command running in a sandbox: its output as it comes, its stdin, signals, its exit.

    Output flows whether or not anyone listens (a listener that falls behind slows the command,
    as a full pipe would); each :meth:`subscribe` sees what comes after it.
    """

    def __init__(
        self, sandbox: Sandbox, spawned: Spawned, pid: int, command: Command, early: list[Output], time_s: float | None
    ) -> None:
        self.sandbox = sandbox
        self.pid = pid
        self.command = command
        self._spawned = spawned
        self._early = early
        self._time_s = time_s
        self._subscribers: list[MemoryObjectSendStream[Output]] = []
        self._exit: Exit | None = None
        self._ended = anyio.Event()
        self._signalled: int | None = None
        self._timed_out = False
        self._started = False

    @property
    def exit(self) -> Exit | None:
        """How it ended, or None while it runs."""
        return self._exit

    def start(self) -> None:
        """Let the output flow (once: the first listener subscribes before it does)."""
        if not self._started:
            self._started = True
            self.sandbox.tasks.start_soon(self._pump)

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[MemoryObjectReceiveStream[Output]]:
        """Output from now on; the stream ends when the process's output does."""
        send, receive = anyio.create_memory_object_stream[Output](SUBSCRIBER_BUFFER)
        if self._exit is not None:
            send.close()
        else:
            self._subscribers.append(send)
        with receive:
            yield receive
        with contextlib.suppress(ValueError):
            self._subscribers.remove(send)
        send.close()

    async def wait(self) -> Exit:
        await self._ended.wait()
        assert self._exit is not None
        return self._exit

    async def send_stdin(self, data: bytes) -> None:
        await self._spawned.send(data)

    async def resize(self, size: TerminalSize) -> None:
        """A new size for its pseudo-terminal (``SandboxError`` when it has none)."""
        if self.command.terminal is None:
            raise SandboxError(f"process {self.pid} was not started on a terminal")
        self.sandbox._require_running()
        await self._spawned.resize(size.rows, size.cols)

    async def close_stdin(self) -> None:
        await self._spawned.close_input()

    async def signal(self, number: int = signals.SIGKILL) -> bool:
        """Send ``number`` to the process and everything in its session; False once it has ended."""
        if self._exit is not None:
            return False
        self.sandbox._require_running()
        self._signalled = number
        await self.sandbox._kill_session(self.pid, number, self.command.user)
        return True

    async def abandon(self) -> None:
        """Stop following it: its sandbox is gone, and the container engine may never say so."""
        await self._spawned.aclose()

    async def _pump(self) -> None:
        try:
            async with anyio.create_task_group() as group:
                if self._time_s is not None:
                    group.start_soon(self._watch, self._time_s)
                for output in self._early:
                    await self._publish(output)
                while (received := await self._spawned.receive()) is not None:
                    await self._publish(Output(stream=received[0], data=received[1]))
                # The sandbox may be gone already (killed, expired): then nobody knows.
                code = None
                with contextlib.suppress(EngineError):
                    code = await self._spawned.exit_code()
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._spawned.aclose()
        signal = (
            code - 128 if code is not None and self._signalled is not None and code == 128 + self._signalled else None
        )
        self._exit = Exit(exit_code=code, signal=signal, timed_out=self._timed_out)
        self.sandbox._forget(self)
        for subscriber in self._subscribers:
            subscriber.close()
        self._subscribers.clear()
        self._ended.set()

    async def _publish(self, output: Output) -> None:
        for subscriber in list(self._subscribers):
            try:
                await subscriber.send(output)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                with contextlib.suppress(ValueError):
                    self._subscribers.remove(subscriber)

    async def _watch(self, time_s: float) -> None:
        await anyio.sleep(time_s)
        await self.sandbox._unpaused()  # nothing can be started in a frozen sandbox, a kill neither
        self._timed_out = True
        try:
            await self.signal(signals.SIGKILL)
        except EngineError:
            # Killing takes a new process in the container; one whose pids are all taken (a fork
            # bomb) has no room for it. A limit that cannot be enforced ends the sandbox instead,
            # at once: the command's own end (its leader may die while the rest goes on) must
            # not call that off.
            self.sandbox.set_timeout(0)
            return
        # The kill ran; a session that still has not ended is ended with its sandbox.
        await anyio.sleep(KILL_GRACE_S)
        self.sandbox.set_timeout(0)


class Sandbox:
    """Commands and files inside one container. Created by :meth:`Engine.sandboxes.create`.

    Its root filesystem is read-only; ``/home/user`` (the user's home and working directory)
    and ``/tmp`` are writable and in RAM (``Limits.tmpfs_mb`` each).
    """

    def __init__(
        self,
        runtime: Runtime,
        container: ContainerRef | None,
        limits: Limits,
        tasks: BackgroundTasks,
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        template: Language = "python",
        operator_template: str | None = None,
        sandbox_id: str | None = None,
        started_at: datetime.datetime | None = None,
        volumes: Mapping[str, str] | None = None,
    ) -> None:
        self.id = sandbox_id or secrets.token_hex(10)
        # path -> the volume mounted there: kept for a resume from disk, and for who uses a volume.
        self.volumes = dict(volumes or {})
        # None while it is paused to disk: its files are in an archive, and no container runs.
        self.container = container
        self.limits = limits
        self.template = template
        self.operator_template = operator_template
        self.env = dict(env or {})
        self.metadata = dict(metadata or {})
        self.started_at = started_at or datetime.datetime.now(datetime.UTC)
        self._runtime = runtime
        self.tasks = tasks
        self._deadline = time.monotonic() + timeout_s
        self.processes: dict[int, Process] = {}
        self._helpers: set[Process] = set()
        # Code-interpreter states and directory watchers, by id; they end with the sandbox.
        self.contexts: dict[str, CodeContext] = {}
        self.watchers: dict[str, Watcher] = {}
        self.metrics_samples: collections.deque[Metrics] = collections.deque(maxlen=MAX_METRICS_SAMPLES)
        # Frozen in place (see ``pause``) or paused to disk, with what its file systems held then.
        self.paused = container is None
        self._frozen_disk = (0, 0)
        self._resumed = anyio.Event()

    # -- lifetime -------------------------------------------------------------------------------

    @property
    def users(self) -> tuple[str, ...]:
        """Who a command or a file operation may run as: the sandbox's user, and its root where
        the runtime gave it a user namespace of its own (the OCI runtime does)."""
        has_root = self.container is not None and self.container.root_uid is not None
        return (SANDBOX_USER, SANDBOX_ROOT) if has_root else (SANDBOX_USER,)

    @property
    def on_disk(self) -> bool:
        """Paused to disk (E2B's filesystem mode): its files kept, its container gone, until
        :meth:`Sessions.resume` makes it one again."""
        return self.container is None

    @property
    def _running_container(self) -> ContainerRef:
        if self.container is None:
            raise SandboxError(f"sandbox {self.id} is paused to disk; resume it first (E2B: Sandbox.connect)")
        return self.container

    def _check_user(self, user: str) -> None:
        if user not in self.users:
            because = "" if user != SANDBOX_ROOT else " (a root of its own needs the oci runtime's user namespaces)"
            raise SandboxError(f"sandbox {self.id} has no user {user!r}{because}; its users: {', '.join(self.users)}")

    @property
    def end_at(self) -> datetime.datetime:
        """When the sandbox expires, unless its timeout is set again."""
        return datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=self.seconds_left)

    @property
    def seconds_left(self) -> float:
        return max(0.0, self._deadline - time.monotonic())

    def set_timeout(self, seconds: float) -> None:
        """Expire ``seconds`` from now, sooner or later than before."""
        self._deadline = time.monotonic() + seconds

    async def pause(self) -> bool:
        """Freeze every process where it is: the sandbox keeps its memory, its files and its
        processes' state, and uses no CPU, until :meth:`resume`. Its time to live runs on, so a
        sandbox paused and forgotten still ends. False when it was paused already."""
        if self.paused:
            return False
        self._frozen_disk = await self._scratch_usage()
        await self._runtime.freeze(self._running_container)
        self.paused, self._resumed = True, anyio.Event()
        return True

    async def resume(self) -> bool:
        """Let its processes run on from where :meth:`pause` stopped them; False when it was not paused."""
        if not self.paused:
            return False
        if self.on_disk:
            raise SandboxError(
                f"sandbox {self.id} is paused to disk: Engine.sandboxes.resume makes it a container again"
            )
        await self._runtime.thaw(self._running_container)
        self.paused = False
        self._resumed.set()
        return True

    async def _unpaused(self) -> None:
        """Return once the sandbox is not paused."""
        while self.paused:
            await self._resumed.wait()

    async def _save_files(self, archive: int) -> None:
        """End every process of the sandbox, then write its files into the descriptor ``archive``
        (see :meth:`_write_archive`): what a pause to disk keeps."""
        self._require_running()
        async with self._all_stopped() as holder:
            # Stopped, none forks again: the pids a killed one frees are taken by no one.
            await holder.ask(b"kill", answer=b"ended")
        for context in self.contexts.values():
            context.abandon()
        self.contexts.clear()
        self.watchers.clear()
        # Their output ends with them; one that still has not after a moment is let go of.
        with anyio.move_on_after(PROCESSES_END_S):
            for process in [*self.processes.values(), *self._helpers]:
                process.start()
                await process.wait()
        await self._abandon_processes()
        self._frozen_disk = await self._scratch_usage()
        await self._write_archive(archive, self._frozen_disk[0])

    async def _copy_files(self, archive: int) -> None:
        """Stop every process of the sandbox while its files are written into the descriptor
        ``archive``, then let them go on: a snapshot, whose files no process changes as it is
        taken."""
        self._require_running()
        async with self._all_stopped():
            used, _ = await self._scratch_usage()
            await self._write_archive(archive, used)

    @contextlib.asynccontextmanager
    async def connect_port(self, port: int, *, time_s: float | None = None) -> AsyncIterator[PortStream]:
        """A byte stream to what listens on ``port`` on the sandbox's loopback (for at most
        ``time_s``, or as long as the sandbox lives). A relay inside the sandbox, as its user,
        connects and passes the bytes over its stdin and stdout: the sandbox still has no network,
        and the stream is no more than a command's. ``PortRefused`` when nothing listens there."""
        if not 1 <= port <= 65535:
            raise ValueError(f"a port is from 1 to 65535, not {port}")
        process = await self.start(
            ["bash", "-c", PORT_RELAY, "relay", str(port)], cwd="/", stdin=True, time_s=time_s, listed=False
        )
        with process.subscribe() as output:
            process.start()
            try:
                first = await output.receive()
            except anyio.EndOfStream:
                first = Output(stream="stderr", data=b"")
            if first.stream == "stderr" or not first.data.startswith(PORT_CONNECTED):
                with anyio.CancelScope(shield=True):
                    await process.signal()
                raise PortRefused(f"nothing in sandbox {self.id} listens on port {port}")
            try:
                yield PortStream(process, output, first.data[len(PORT_CONNECTED) :])
            finally:
                with anyio.CancelScope(shield=True):
                    await process.signal()

    @contextlib.asynccontextmanager
    async def _all_stopped(self) -> AsyncIterator[_Holder]:
        """Every process of the sandbox stopped for the block (see ``HOLD_SCRIPT``; the holder
        can end them all), then let go on. A stopped process keeps its pid, so even a fork bomb
        runs out of them and is stopped whole."""
        argv = ["sh", "-c", HOLD_SCRIPT, "sh", str(HOLD_ROUNDS)]
        process = await self.start(argv, cwd="/", stdin=True, listed=False, user=self.users[-1])
        with process.subscribe() as output:
            holder = _Holder(self.id, process, output)
            process.start()
            try:
                await holder.ask(None, answer=b"stopped")
                yield holder
            finally:
                with anyio.CancelScope(shield=True):
                    await holder.let_go()

    async def _write_archive(self, archive: int, used_bytes: int) -> None:
        """Write the sandbox's writable places (files, directories, links, owners, modes and
        times), which hold ``used_bytes``, as a tar archive into the descriptor ``archive``. The
        sandbox's own ``tar`` reads them, as its most privileged user (a file that user cannot
        read is left out, as tar's ``--ignore-failed-read`` says); the archive is capped at twice
        what those places hold, plus room for tar's headers. No process may run but stopped."""
        room = 2 * used_bytes + ARCHIVE_HEADROOM_BYTES
        # What the places hold, not the places: they are made afresh, each with its own owner and mode.
        places = " ".join(place.lstrip("/") for place in SANDBOX_SCRATCH_PLACES)
        script = f"find {places} -mindepth 1 -maxdepth 1 -print0 | tar -c -f - --null -T - --ignore-failed-read"
        argv = ["sh", "-c", script]
        process = await self.start(argv, cwd="/", time_s=ARCHIVE_TIME_S, listed=False, user=self.users[-1])
        errors = bytearray()
        with process.subscribe() as output:
            process.start()
            async for chunk in output:
                if chunk.stream == "stderr":
                    errors += chunk.data[: 4096 - len(errors)]
                    continue
                room -= len(chunk.data)
                if room < 0:
                    break
                await anyio.to_thread.run_sync(_write_all, archive, chunk.data)
        if room < 0:
            # Killed once nobody listens, as in exec.
            await process.signal(signals.SIGKILL)
            raise SandboxError(f"sandbox {self.id}'s files make an archive larger than they are")
        ended = await process.wait()
        # tar's 1 is "a file changed as it was read", which nothing running can do now.
        if ended.exit_code not in (0, 1):
            detail = errors.decode(errors="replace").strip()[:500]
            raise SandboxError(f"sandbox {self.id}'s files could not be archived ({ended.status}): {detail}")

    async def _restore_files(self, source: AsyncFile[bytes]) -> None:
        """Unpack what :meth:`_write_archive` wrote, read from ``source``, as the user that wrote it,
        into the fresh places."""
        argv = [*PYTHON_ISOLATED, "-c", RESTORE_SCRIPT]
        process = await self.start(argv, cwd="/", stdin=True, time_s=ARCHIVE_TIME_S, listed=False, user=self.users[-1])
        with process.subscribe() as output:
            process.start()
            while chunk := await source.read(ARCHIVE_CHUNK_BYTES):
                await process.send_stdin(chunk)
            await process.close_stdin()
            errors = b"".join([chunk.data async for chunk in output if chunk.stream == "stderr"])
        ended = await process.wait()
        if ended.exit_code != 0:
            detail = errors.decode(errors="replace").strip()[:500]
            raise SandboxError(f"sandbox {self.id}'s files could not be restored ({ended.status}): {detail}")

    def _went_to_disk(self) -> ContainerRef:
        """Mark it paused to disk; the container it leaves, for its caller to remove."""
        container = self._running_container
        self.container, self.paused, self._resumed = None, True, anyio.Event()
        return container

    def _came_back(self, container: ContainerRef | None) -> None:
        """Running again in ``container`` (None: back to disk, a resume that failed)."""
        self.container, self.paused = container, container is None
        if container is not None:
            self._resumed.set()

    def _require_running(self) -> None:
        if self.paused:
            raise SandboxError(f"sandbox {self.id} is paused; resume it first (E2B: Sandbox.connect)")

    # -- processes ------------------------------------------------------------------------------

    async def start(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bool = False,
        time_s: float | None = None,
        tag: str | None = None,
        listed: bool = True,
        terminal: TerminalSize | None = None,
        user: str = SANDBOX_USER,
    ) -> Process:
        """Start ``argv`` as ``user`` (one of :attr:`users`); subscribe to its output, then
        :meth:`Process.start` it.

        ``time_s`` kills it (and its session) that long from now; ``stdin=False`` gives it an
        empty stdin at once. The engine's own helpers (file operations, kernels, watchers) are
        not ``listed`` among the sandbox's processes. With ``terminal`` it runs on a
        pseudo-terminal of that size (its controlling terminal), whose output is its stdout and
        whose input stays open whatever ``stdin`` says.
        """
        self._require_running()
        self._check_user(user)
        cwd = self._resolve(cwd or SANDBOX_USER_HOME)
        command = Command(argv=tuple(argv), cwd=cwd, env=dict(env or {}), tag=tag, terminal=terminal, user=user)
        for attempt in range(1, COMMAND_START_TRIES + 1):
            spawned = await self._runtime.spawn(
                self._running_container,
                [*PID_WRAPPER, *command.argv],
                workdir=command.cwd,
                env={**self._base_env(user), **self.env, **command.env},
                terminal=(terminal.rows, terminal.cols) if terminal is not None else None,
                as_root=user == SANDBOX_ROOT,
            )
            try:
                pid, early = await _read_pid(spawned)
                # A terminal's input stays open: ending it hangs the terminal up under gVisor, and
                # what the command writes after that is lost.
                if not stdin and terminal is None:
                    await spawned.close_input()
                break
            except BaseException as exc:
                with anyio.CancelScope(shield=True):
                    await spawned.aclose()
                # Nothing at all came back, not even the wrapper's pid, which it prints before the
                # command runs: the command never ran, so it may be started again (seen under
                # gVisor beside a loaded machine: an exec whose stream ends at once). What came
                # before this process read Docker's answer to the exec is not lost (DockerCommand),
                # else a command that ran would look so, and run twice.
                if not isinstance(exc, _NothingCameBack) or attempt == COMMAND_START_TRIES:
                    raise
            await anyio.sleep(0.1 * attempt)
        process = Process(self, spawned, pid, command, early, time_s)
        if listed:
            self.processes[pid] = process
        else:
            self._helpers.add(process)
        return process

    def running(self) -> list[Process]:
        return [p for p in self.processes.values() if p.exit is None]

    async def _abandon_processes(self) -> None:
        """Stop following every process: the sandbox is gone, and the container engine may never
        say so."""
        for process in [*self.processes.values(), *self._helpers]:
            if process.exit is None:
                await process.abandon()

    def _forget(self, process: Process) -> None:
        if self.processes.get(process.pid) is process:
            del self.processes[process.pid]
        self._helpers.discard(process)

    async def exec(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes = b"",
        time_s: float | None = None,
        workdir: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str = SANDBOX_USER,
    ) -> RunResult:
        """Run ``argv`` as ``user`` to completion (or to ``time_s``, by default
        ``Limits.wall_time_s``), its output kept up to ``Limits.output_bytes`` per stream."""
        started = time.monotonic()
        process = await self.start(
            argv, cwd=workdir, env=env, stdin=True, time_s=time_s or self.limits.wall_time_s, user=user
        )
        kept: dict[OutputStream, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        truncated: set[OutputStream] = set()
        with process.subscribe() as output:
            process.start()
            if stdin:
                await process.send_stdin(stdin)
            await process.close_stdin()
            async for chunk in output:
                buffer = kept[chunk.stream]
                room = self.limits.output_bytes - len(buffer)
                buffer += chunk.data[:room]
                if len(chunk.data) > room:
                    truncated.add(chunk.stream)
                    break
        if truncated:
            # Killed once nobody listens: output that no one reads holds up Docker's next exec
            # into the container, the kill's own.
            await process.signal(signals.SIGKILL)
        ended = await process.wait()
        if ended.timed_out:
            outcome = Outcome.TIMEOUT
        elif truncated:
            outcome = Outcome.OUTPUT_LIMIT
        elif ended.exit_code == 0:
            outcome = Outcome.OK
        else:
            outcome = Outcome.RUNTIME_ERROR
        return RunResult(
            outcome=outcome,
            exit_code=ended.exit_code,
            stdout=kept["stdout"].decode("utf-8", errors="replace"),
            stderr=kept["stderr"].decode("utf-8", errors="replace"),
            stdout_truncated="stdout" in truncated,
            stderr_truncated="stderr" in truncated,
            wall_time_s=time.monotonic() - started,
        )

    async def _kill_session(self, pid: int, number: int, user: str) -> None:
        """Signal, as ``user``, every process of the session ``pid`` leads."""
        spawned = await self._runtime.spawn(
            self._running_container,
            ["sh", "-c", KILL_SCRIPT, str(number), str(pid)],
            workdir="/",
            env=self._base_env(user),
            as_root=user == SANDBOX_ROOT,
        )
        try:
            await spawned.close_input()
            while await spawned.receive() is not None:
                pass
        finally:
            await spawned.aclose()

    # -- metrics --------------------------------------------------------------------------------

    async def metrics(self) -> Metrics:
        """Sample its CPU and memory (from its cgroup) and its file systems now; the sample is
        kept in ``metrics_samples``. Sampled when asked only: an idle sandbox costs nothing."""
        usage = await self.usage()
        # A frozen sandbox's files are as they were when it was paused.
        disk_used, disk_total = self._frozen_disk if self.paused else await self._scratch_usage()
        now = datetime.datetime.now(datetime.UTC)
        before = self.metrics_samples[-1] if self.metrics_samples else None
        since, cpu_before = (before.timestamp, before.cpu_s) if before else (self.started_at, 0.0)
        allowed_s = max((now - since).total_seconds(), 1e-6) * self.limits.cpus
        sample = Metrics(
            timestamp=now,
            cpu_count=max(1, round(self.limits.cpus)),
            cpu_used_pct=round(min(100.0, max(0.0, 100 * (usage.cpu_s - cpu_before) / allowed_s)), 2),
            cpu_s=usage.cpu_s,
            mem_used=usage.memory_bytes,
            mem_total=self.limits.memory_mb << 20,
            mem_cache=usage.cache_bytes,
            disk_used=disk_used,
            disk_total=disk_total,
        )
        self.metrics_samples.append(sample)
        return sample

    async def usage(self) -> ContainerUsage:
        """Its cgroup's CPU time and memory now, read from outside (nothing runs in it); none
        while it is paused to disk."""
        if self.container is None:
            return ContainerUsage(cpu_s=0.0, memory_bytes=0, cache_bytes=0)
        return await self._runtime.usage(self.container)

    async def _scratch_usage(self) -> tuple[int, int]:
        """Bytes used and in all of the writable file systems, as the sandbox's kernel counts them
        (from inside: gVisor keeps its file systems in its own memory)."""
        # By its full path: the root file system is read-only, while the sandbox's PATH is the user's.
        process = await self.start(
            ["/usr/bin/stat", "-f", "-c", "%b %f %S", *SANDBOX_SCRATCH_PLACES], cwd="/", time_s=10, listed=False
        )
        ended, stdout, stderr = await _collect(process)
        try:
            if ended.exit_code != 0:
                raise ValueError(stderr.decode(errors="replace")[:200])
            counts = [[int(field) for field in line.split()] for line in stdout.decode().splitlines()]
            return sum((blocks - free) * size for blocks, free, size in counts), sum(b * s for b, _, s in counts)
        except ValueError as exc:  # also a line that is not three numbers
            raise SandboxError(f"its file systems could not be measured: {exc}") from None

    # -- code interpreter ---------------------------------------------------------------------------

    def create_context(self, language: str = "python", cwd: str | None = None) -> CodeContext:
        """A fresh interpreter state (its kernel starts with its first cell); at most
        ``MAX_CONTEXTS`` in a sandbox (each is kept on the host)."""
        if len(self.contexts) >= MAX_CONTEXTS:
            raise SandboxLimitReached(f"{MAX_CONTEXTS} code contexts are open in sandbox {self.id}; remove one first")
        context = CodeContext(self, language, self._resolve(cwd or SANDBOX_USER_HOME))
        self.contexts[context.id] = context
        return context

    def context(self, context_id: str | None = None, language: str = "python") -> CodeContext:
        """A context by id, or the language's default one (made on first use)."""
        if context_id is None:
            context_id = f"default-{language}"
            if context_id not in self.contexts:
                self.contexts[context_id] = CodeContext(self, language, SANDBOX_USER_HOME, context_id=context_id)
        try:
            return self.contexts[context_id]
        except KeyError:
            raise ContextNotFound(f"no code context {context_id!r} in sandbox {self.id}") from None

    async def remove_context(self, context_id: str) -> None:
        await self.context(context_id).close()
        del self.contexts[context_id]

    async def restart_context(self, context_id: str) -> None:
        """Forget a context's state: its kernel starts anew."""
        await self.context(context_id).restart()

    def run_code(
        self,
        code: str,
        *,
        context_id: str | None = None,
        language: str = "python",
        env: Mapping[str, str] | None = None,
        time_s: float = 300.0,
        quiet_s: float | None = None,
    ) -> AsyncGenerator[CellEvent, None]:
        """Run a cell in a context (by default the language's own); see :meth:`CodeContext.run`."""
        self._require_running()
        return self.context(context_id, language).run(code, env=env, time_s=time_s, quiet_s=quiet_s)

    # -- files ----------------------------------------------------------------------------------

    def _resolve(self, path: str) -> str:
        """An absolute path: relative ones (and ``~``) are taken from the user's home."""
        if path == "~" or path.startswith("~/"):
            path = SANDBOX_USER_HOME + path[1:]
        if not path.startswith("/"):
            path = f"{SANDBOX_USER_HOME}/{path}"
        return posixpath.normpath(path)

    async def write_file(self, path: str, data: bytes | AsyncIterable[bytes], *, user: str = SANDBOX_USER) -> Entry:
        """Write a file as ``user`` (its parent directories made as needed), from bytes or a
        stream of them. Every file operation runs as the user it names, as a command does."""
        path = self._resolve(path)
        process = await self._files(user, "write", path, stdin=True)
        try:
            with process.subscribe() as output:
                process.start()
                if isinstance(data, bytes):
                    await process.send_stdin(data)
                else:
                    async for chunk in data:
                        await process.send_stdin(chunk)
                await process.close_stdin()
                errors = b"".join([chunk.data async for chunk in output if chunk.stream == "stderr"])
        except BaseException:
            # The stream broke off (a client that went away, a body past the server's limit): the
            # writer would wait for the rest for ever, holding a process here and a stream there.
            with anyio.CancelScope(shield=True), contextlib.suppress(EngineError):
                await process.signal(signals.SIGKILL)
                await process.wait()
            raise
        _raise_for(await process.wait(), path, errors)
        return await self.stat(path, user=user)

    @contextlib.asynccontextmanager
    async def open_file(self, path: str, *, user: str = SANDBOX_USER) -> AsyncIterator[AsyncIterator[bytes]]:
        """A file's bytes as a stream, without a size cap; raises before the first byte when it
        cannot be read (missing, a directory, not permitted)."""
        path = self._resolve(path)
        process = await self._files(user, "read", path)
        with process.subscribe() as output:
            process.start()
            first: Output | None = None
            async for chunk in output:
                if chunk.stream == "stdout":
                    first = chunk
                    break
            if first is None:
                _raise_for(await process.wait(), path, b"")

            async def chunks() -> AsyncIterator[bytes]:
                if first is not None:
                    yield first.data
                async for chunk in output:
                    if chunk.stream == "stdout":
                        yield chunk.data

            yield chunks()
        if process.exit is None:
            await process.signal(signals.SIGKILL)

    async def read_file(self, path: str, *, user: str = SANDBOX_USER) -> bytes:
        async with self.open_file(path, user=user) as chunks:
            return b"".join([chunk async for chunk in chunks])

    async def stat(self, path: str, *, user: str = SANDBOX_USER) -> Entry:
        entries = await self._entries(user, "stat", self._resolve(path))
        return entries[0]

    async def list_dir(self, path: str, depth: int = 1, *, user: str = SANDBOX_USER) -> list[Entry]:
        return await self._entries(user, "list", self._resolve(path), str(max(1, depth)))

    async def make_dir(self, path: str, *, user: str = SANDBOX_USER) -> Entry:
        """Make a directory and its parents; ``FileExistsError`` when the path exists."""
        return (await self._entries(user, "mkdir", self._resolve(path)))[0]

    async def move(self, source: str, destination: str, *, user: str = SANDBOX_USER) -> Entry:
        return (await self._entries(user, "move", self._resolve(source), self._resolve(destination)))[0]

    async def remove(self, path: str, *, user: str = SANDBOX_USER) -> None:
        """Remove a file or a directory with what it holds."""
        await self._entries(user, "remove", self._resolve(path))

    async def watch(self, path: str, *, recursive: bool = False, user: str = SANDBOX_USER) -> Watcher:
        """Watch a directory (and, ``recursive``, the ones below it) from now on; raises as
        :meth:`stat` does when it cannot be watched."""
        if len(self.watchers) >= MAX_WATCHERS:
            raise SandboxLimitReached(f"{MAX_WATCHERS} watchers are open in sandbox {self.id}; stop one first")
        path = self._resolve(path)
        argv = [*PYTHON_ISOLATED, WATCH_SCRIPT, path, *(["--recursive"] if recursive else [])]
        process = await self.start(argv, cwd="/", listed=False, user=user)
        watcher = Watcher(self, process, path, recursive)
        self.watchers[watcher.id] = watcher
        if not await self.tasks.start(watcher._run):
            _raise_for(await process.wait(), path, b"")
            raise SandboxError(f"watching {path} failed")
        return watcher

    async def _files(self, user: str, op: str, *args: str, stdin: bool = False) -> Process:
        argv = ["sh", "-c", FILES_SCRIPT, ENTRY_FORMAT, op, *args]
        return await self.start(argv, cwd="/", stdin=stdin, listed=False, user=user)

    async def _entries(self, user: str, op: str, *args: str) -> list[Entry]:
        ended, stdout, stderr = await _collect(await self._files(user, op, *args))
        _raise_for(ended, args[0], stderr)
        return self._parse_entries(stdout)

    def _parse_entries(self, raw: bytes) -> list[Entry]:
        fields = raw.split(b"\0")[:-1]
        entries = []
        for at in range(0, len(fields) - ENTRY_FIELDS + 1, ENTRY_FIELDS):
            kind, size, mode, owner, group, modified, target, path = (
                f.decode("utf-8", "surrogateescape") for f in fields[at : at + ENTRY_FIELDS]
            )
            entries.append(
                Entry(
                    path=path,
                    type={"f": EntryType.FILE, "d": EntryType.DIRECTORY, "l": EntryType.SYMLINK}.get(
                        kind, EntryType.OTHER
                    ),
                    size=int(size),
                    mode=int(mode, 8),
                    owner=owner,
                    group=group,
                    modified=datetime.datetime.fromtimestamp(float(modified), datetime.UTC),
                    symlink_target=target or None,
                )
            )
        return entries

    def _base_env(self, user: str) -> dict[str, str]:
        # Root's home too: /root is in the read-only image, and E2B's root writes where its user does.
        return {"HOME": SANDBOX_USER_HOME, "USER": user, "LOGNAME": user}


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


class _Holder:
    """The conversation with ``HOLD_SCRIPT``: one line asked, one awaited."""

    def __init__(self, sandbox_id: str, process: Process, output: MemoryObjectReceiveStream[Output]) -> None:
        self._sandbox_id = sandbox_id
        self._process = process
        self._output = output
        self._said = bytearray()
        self._complaint = bytearray()

    async def ask(self, line: bytes | None, *, answer: bytes) -> None:
        """Send ``line`` (if any), then wait for the line ``answer``; ``SandboxError`` when the
        holder ends or stays silent first."""
        if line is not None:
            await self._process.send_stdin(line + b"\n")
        with anyio.move_on_after(HOLD_TIME_S):
            async for chunk in self._output:
                if chunk.stream == "stderr":
                    self._complaint += chunk.data[: 1000 - len(self._complaint)]
                    continue
                self._said += chunk.data
                if b"\n" in self._said:
                    said, _, self._said[:] = self._said.partition(b"\n")
                    if said == answer:
                        return
                    break
        detail = bytes(self._complaint).decode(errors="replace").strip() or "no answer"
        # The answers say what was done: "stopped", "ended".
        raise SandboxError(f"sandbox {self._sandbox_id}'s processes could not all be {answer.decode()}: {detail}")

    async def let_go(self) -> None:
        """End its input: it lets every process that is left go on, and ends."""
        with contextlib.suppress(EngineError):
            await self._process.close_stdin()
        with anyio.move_on_after(HOLD_TIME_S):
            async for _ in self._output:
                pass
            await self._process.wait()


async def _collect(process: Process) -> tuple[Exit, bytes, bytes]:
    """Start a helper and wait for its end: its exit, stdout and stderr."""
    streams: dict[OutputStream, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
    with process.subscribe() as output:
        process.start()
        async for chunk in output:
            streams[chunk.stream] += chunk.data
    return await process.wait(), bytes(streams["stdout"]), bytes(streams["stderr"])


class _NothingCameBack(SandboxError):
    """A command's exec ended before its wrapper wrote anything: the command did not run."""


async def _read_pid(spawned: Spawned) -> tuple[int, list[Output]]:
    """The wrapper's first stdout line, and the output that came with or before it (stderr may
    overtake stdout: the container engine reads the two pipes apart)."""
    header = bytearray()
    early: list[Output] = []
    while b"\n" not in header:
        received = await spawned.receive()
        if received is None:
            detail = b"".join(o.data for o in early).decode(errors="replace").strip()
            if detail or header:
                raise SandboxError(f"a command could not start: {detail or header[:200].decode(errors='replace')}")
            status = await spawned.exit_code()
            raise _NothingCameBack(f"a command could not start (its exec ended with status {status})")
        stream, data = received
        if stream == "stdout":
            header += data
        else:
            early.append(Output(stream=stream, data=data))
    line, _, rest = bytes(header).partition(b"\n")
    # A terminal ends its lines in CR LF; under runc in CR CR LF now and then: runc copies the
    # container's terminal to one of ours, which adds a CR of its own, and stops the container's
    # from adding one only once the command has begun (seen beside a loaded machine).
    line = line.rstrip(b"\r")
    if not line.isdigit():
        raise SandboxError(f"a command could not start: {line[:200].decode(errors='replace')}")
    if rest:
        early.append(Output(stream="stdout", data=rest))
    return int(line), early


def _raise_for(ended: Exit, path: str, stderr: bytes) -> None:
    if ended.exit_code == 0:
        return
    message = stderr.decode("utf-8", errors="replace").strip()
    number = (ended.exit_code or 0) - ERRNO_EXIT_BASE
    error = FILE_ERRORS.get(number)
    if error is not None:
        raise error(number, f"{os.strerror(number)}: {path}", path)
    if "ermission denied" in message or "Read-only file system" in message:
        raise PermissionError(13, message or f"not permitted: {path}", path)
    raise OSError(ended.exit_code, message or f"failed ({ended.status}): {path}", path)
