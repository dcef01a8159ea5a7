"""The async core: one engine owns a runtime, the containers in flight, and the translation
between jobs and harness requests. Every edge (CLI, sync facade, compat layers) calls this."""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic_core import PydanticSerializationError

from ._errors import EngineError, ImageNotFound, RuntimeUnavailable
from ._languages import toolchain
from ._limits import DEFAULT_LIMITS, Limits
from ._models import ErrorInfo, Language, RunResult
from ._settings import Settings
from ._submission import Submission, SubmissionResult
from .harness.protocol import FRAME_ESCAPE_FACTOR, MAX_ERROR_BYTES, MAX_REQUEST_BYTES, STARVED_ALLOWANCE
from .judge._batches import judge_all, judging_by
from .judge._judge import (
    CheckerReport,
    checker_answer,
    conclude,
    interactor_limits_for,
    interactor_reports,
    plan,
    plan_checks,
    plan_controls,
    plan_interactor,
    plan_run,
    run_result,
)
from .judge._protocol import HarnessFeed, HarnessRequest, HarnessRun, Observation, ReportReader, RunEnd, Status
from .runtime import (
    BackgroundTasks,
    ContainerRef,
    ContainerSpec,
    DockerRuntime,
    Exchange,
    OciRuntime,
    Runtime,
    RuntimeInfo,
    UidPool,
)
from .runtime._images import image_tag
from .runtime._labels import Owner, sweep_leases
from .runtime._policy import Purpose, policy_for
from .runtime._pool import PoolStatistics, WarmPool
from .runtime._templates import BuiltTemplate, built_templates
from .sandboxes._sandbox import Sandbox
from .sandboxes._sessions import DEFAULT_TIMEOUT_S, Sessions
from .sandboxes._volumes import Volumes

__all__ = ["Engine", "EngineStatistics", "JobObserver"]

# Pauses before retrying a job whose sandbox failed: doubling from the first to the last, which
# with the default five retries waits out a daemon restart of about 20 seconds.
# How a job comes by its slot: it takes one, one was taken for it, or it runs beyond them.
Slot = Literal["take", "held", "beyond"]
RETRY_PAUSE_S = 1.0
MAX_RETRY_PAUSE_S = 8.0
# Time for the container engine to start a container, on a loaded machine.
START_ALLOWANCE_S = 15.0
# Harness bookkeeping per test (fork, files, reporting), beyond the test's own limit.
PER_TEST_OVERHEAD_S = 1.0
# The harness's own diagnostics are short; a flood there is a broken harness.
HARNESS_STDERR_BYTES = 64 * 1024
# A report frame carries stdout and stderr (each at most Limits.output_bytes of UTF-8, at most
# FRAME_ESCAPE_FACTOR times that once JSON-escaped), a value (at most Limits.output_bytes of
# JSON), and an error of three bounded texts, plus fixed fields.
FRAME_EXPANSION = 2 * FRAME_ESCAPE_FACTOR + 1
FRAME_FIXED_BYTES = 3 * FRAME_ESCAPE_FACTOR * MAX_ERROR_BYTES + 16 * 1024
# Runtimes bound their own calls (the job's deadline, then kill and wait); these catch a runtime
# that does not, so that a wedged container costs one job, never a slot or the engine.
RUNTIME_GRACE_S = 180.0
REMOVE_TIMEOUT_S = 180.0
# A harness writes a frame at least every HEARTBEAT_S while it waits on a test; it may also be
# silent while trusted test code runs in it (bounded by the test's wall-clock limit), and while
# it starts or removes what a test left (in a loaded gVisor sandbox, 35 s has been seen for a
# deep tree). Silent longer than that limit plus this, it is not running any more: a sandbox can
# wedge (gVisor's, when the host's OOM killer takes one of its processes, spins and never
# answers again).
SILENCE_ALLOWANCE_S = 60.0
# Until its first frame, a harness has only to read the request, which it waits for (seen under
# gVisor beside busy loops: a sandbox whose harness never got its request, now and then).
GREETING_ALLOWANCE_S = 30.0
SILENCE_CHECK_S = 1.0


@dataclass(frozen=True)
class EngineStatistics:
    """A snapshot of the engine's load."""

    containers_in_flight: int
    """Jobs holding a slot: their container is starting, running or being removed."""
    jobs_waiting: int
    """Jobs waiting for a slot (``Settings.max_concurrency`` are taken)."""
    pool: PoolStatistics


class JobObserver(Protocol):
    """Hears how long each job's steps took (a server's metrics)."""

    def container_ready(self, seconds: float) -> None:
        """A job waited ``seconds`` for its started container (near zero from the warm pool)."""

    def job_finished(self, seconds: float) -> None:
        """A job's exchange with its container (request in, report out) took ``seconds``."""


@dataclass(frozen=True)
class Interaction:
    """An interactive submission's two runs; and the tests whose interactor ended before the
    program did (its verdict, given first, is the test's, whatever the program did after)."""

    program: HarnessRun
    interactor: HarnessRun
    interactor_first: set[int]


class Engine:
    """Runs untrusted code in hardened, throwaway containers.

    Use it as an async context manager; on entry it connects to the container engine and
    removes containers that crashed engine processes left behind, on exit it removes every
    container it still owns::

        async with Engine() as engine:
            result = await engine.run("print(input()[::-1])", stdin="abc")

    :param settings: where to run containers; defaults come from ``AIRLOCK_*`` variables.
    :param limits: the limits a job gets when it names none.
    :param runtime: the container runtime; the Docker runtime by default.
    :param observer: hears each job's timings.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        limits: Limits = DEFAULT_LIMITS,
        runtime: Runtime | None = None,
        observer: JobObserver | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.limits = limits
        self.observer = observer
        self._waiting = 0
        self._owner = Owner()
        self._runtime = runtime or _default_runtime(self.settings, self._owner)
        self._owner.runtime = self._runtime.name
        # A semaphore, not a limiter: a job's slot is given back by the task that removes its container.
        self._slots = anyio.Semaphore(self.settings.max_concurrency)
        # Held while a job takes more than one slot (see ``_take_slots``).
        self._pairing = anyio.Lock()
        self._live: dict[str, ContainerRef] = {}
        self._images: dict[str, str] = {}
        self._exit_stack: contextlib.AsyncExitStack | None = None
        self._tasks: BackgroundTasks | None = None
        self._pool: WarmPool | None = None
        self._sessions: Sessions | None = None
        paused_dir = self.settings.paused_dir
        self._volumes = Volumes(
            paused_dir / "volumes" if paused_dir is not None else None,
            size_mb=self.settings.volume_size_mb,
            max_kept=self.settings.max_volumes,
            users=lambda volume_id: self.sandboxes.using_volume(volume_id),
        )
        self._info: RuntimeInfo | None = None
        # Jobs talking to their harness: the scope to cancel should it fall silent, and how long it may.
        self._listening: dict[anyio.CancelScope, tuple[ReportReader, float]] = {}
        self._silence_watch: anyio.CancelScope | None = None

    @property
    def runtime(self) -> Runtime:
        return self._runtime

    @property
    def info(self) -> RuntimeInfo:
        """What the runtime is and can do here (known once the engine is open)."""
        if self._info is None:
            raise RuntimeError("the engine is not open; use it as `async with Engine() as engine:`")
        return self._info

    @property
    def pool(self) -> WarmPool:
        if self._pool is None:
            raise RuntimeError("the engine is not open; use it as `async with Engine() as engine:`")
        return self._pool

    @property
    def sandboxes(self) -> Sessions:
        """The live long-lived sandboxes, by id: create, get, list, kill."""
        if self._sessions is None:
            raise RuntimeError("the engine is not open; use it as `async with Engine() as engine:`")
        return self._sessions

    @property
    def volumes(self) -> Volumes:
        """Volumes: file systems that outlive every sandbox, kept in ``Settings.paused_dir``."""
        return self._volumes

    def statistics(self) -> EngineStatistics:
        return EngineStatistics(
            containers_in_flight=self.settings.max_concurrency - self._slots.value,
            jobs_waiting=self._waiting,
            pool=self.pool.statistics(),
        )

    async def __aenter__(self) -> Engine:
        await self._runtime.open()
        self._info = await self._runtime.describe()
        if self.settings.isolation not in self._info.isolations:
            await self._runtime.aclose()
            hint = (
                "the gVisor tier runs through the Docker runtime (AIRLOCK_RUNTIME=docker)"
                if self._runtime.name == "oci"
                else "it needs Debian's runsc registered with the container engine: run scripts/setup --with-gvisor"
            )
            raise RuntimeUnavailable(f"the {self.settings.isolation} isolation tier is not available here: {hint}")
        await self._runtime.remove_leftovers()
        await anyio.to_thread.run_sync(sweep_leases)
        async with contextlib.AsyncExitStack() as stack:
            self._tasks = BackgroundTasks(await stack.enter_async_context(anyio.create_task_group()))
            size = self.settings.max_concurrency if self.settings.pool_size is None else self.settings.pool_size
            self._pool = WarmPool(self._create, self._remove, size, self._tasks)
            self._sessions = Sessions(
                self._runtime,
                self._sandbox_container,
                self._remove,
                self._tasks,
                self.settings.max_sandboxes,
                spec_for=self._sandbox_spec,
                volume_source=self._volumes.source,
                paused_dir=self.settings.paused_dir,
                max_paused=self.settings.max_paused_sandboxes,
                max_snapshots=self.settings.max_snapshots,
            )
            await self._sessions.load_paused()
            self._silence_watch = anyio.CancelScope()
            self._tasks.start_soon(self._watch_silence, self._silence_watch)
            self._exit_stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._sessions is not None:
            with anyio.CancelScope(shield=True):
                await self._sessions.close()
        if self._pool is not None:
            with anyio.CancelScope(shield=True):
                await self._pool.close()
        with anyio.CancelScope(shield=True):
            await self._volumes.close()
        if self._silence_watch is not None:
            self._silence_watch.cancel()
        if self._exit_stack is not None:
            # Waits for background work (removals in progress, containers still starting); those
            # tasks shield their own removals.
            await self._exit_stack.aclose()
        with anyio.CancelScope(shield=True):
            for container in list(self._live.values()):
                await self._remove(container)
            # Anything of this engine's that slipped through (a daemon restart mid-removal).
            with contextlib.suppress(EngineError):
                await self._runtime.remove_leftovers(session=self._owner.session)
                # Nothing of this engine's is left: its lease can go (else it stays, released,
                # and the next engine removes what is left).
                self._owner.release()
            await self._runtime.aclose()

    # -- public operations ----------------------------------------------------------------------

    async def run(
        self,
        code: str,
        *,
        stdin: str = "",
        language: Language = "python",
        limits: Limits | None = None,
        args: Sequence[str] = (),
        files: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Run ``code`` as a program with ``stdin`` as its standard input and ``args`` as its
        arguments. ``files`` (plain names and texts) are put beside the program, where it is
        compiled or imported from (sources its compiler takes are compiled with it), and in its
        working directory: a program of several files, as Piston runs one.

        A failure of the sandbox around the program comes back as a result with
        ``Outcome.SANDBOX_ERROR``; only a missing image or an unreachable engine raise.
        """
        limits = limits or self.limits
        request = plan_run(code, stdin, limits, language, args, files, process_per_test=self.settings.process_per_test)
        return run_result(await self.run_harness(language, request, limits))

    async def judge(self, submission: Submission) -> SubmissionResult:
        """Run ``submission``'s tests in one fresh container and judge every one of them.

        Never raises for a problem with the submission or the sandbox: those come back as
        verdicts (``SANDBOX_ERROR`` with ``error`` set when the sandbox failed). A missing image
        raises ``ImageNotFound``: that is the installation's problem, not the submission's.
        """
        started = time.monotonic()
        limits = submission.limits or self.limits
        interaction: Interaction | None = None
        try:
            if submission.interactor is not None:
                interaction = await self._interact(submission, limits)
                run = interaction.program
            else:
                request = plan(submission, limits, process_per_test=self.settings.process_per_test)
                run = await self.run_harness(submission.language, request, limits)
        except ImageNotFound:
            raise
        except (EngineError, ValueError) as exc:
            run = HarnessRun(observations=[], end=RunEnd.SANDBOX_ERROR, error=_sandbox_error(exc))
        if interaction is not None:
            checks = interactor_reports(interaction.interactor, len(submission.tests), interaction.interactor_first)
        else:
            checks = await self._check(submission, run, limits)
        # A large output takes a while to compare: off the event loop, where other jobs stream.
        return await anyio.to_thread.run_sync(conclude, submission, run, time.monotonic() - started, checks)

    async def _check(self, submission: Submission, run: HarnessRun, limits: Limits) -> dict[int, CheckerReport]:
        """The checker's reports, from containers of its own started after the program's was
        removed; for each test it gave no usable answer for, the control (see ``_judge._checked``)."""
        checker = submission.checker
        if checker is None:
            return {}
        observed, missing = await self._checker_runs(checker.language, plan_checks(submission, run, limits), limits)
        unusable = [index for index, found in observed.items() if isinstance(checker_answer(checker, found), str)]
        controls, _ = await self._checker_runs(checker.language, plan_controls(submission, unusable, limits), limits)
        reports = {index: CheckerReport(found, controls.get(index)) for index, found in observed.items()}
        reports.update({index: CheckerReport(None, missing=why) for index, why in missing.items()})
        return reports

    async def _checker_runs(
        self, language: Language, requests: list[tuple[list[int], HarnessRequest]], limits: Limits
    ) -> tuple[dict[int, Observation], dict[int, str]]:
        """The checker's observation of each test, by its index; and, for the tests it reported
        nothing for, why."""
        observed: dict[int, Observation] = {}
        missing: dict[int, str] = {}
        for indices, request in requests:
            try:
                checked = await self.run_harness(language, request, limits)
            except (EngineError, ValueError) as exc:
                missing.update(dict.fromkeys(indices, str(exc)))
                continue
            found = {indices[o.index]: o for o in checked.observations if o.index < len(indices)}
            observed.update(found)
            why = checked.error.message if checked.error is not None else "it reported nothing for this test"
            missing.update({index: why for index in indices if index not in found})
        return observed, missing

    async def judge_many(
        self, submissions: Iterable[Submission], *, deadline_s: float | None = None
    ) -> list[SubmissionResult]:
        """Judge many submissions concurrently; the results come back in input order (by
        ``deadline_s``, see :meth:`judging`)."""
        return await judge_all(functools.partial(self.judging, deadline_s=deadline_s), submissions)

    @contextlib.asynccontextmanager
    async def judging(
        self, submissions: Iterable[Submission], *, deadline_s: float | None = None
    ) -> AsyncIterator[MemoryObjectReceiveStream[tuple[int, SubmissionResult]]]:
        """Judge ``submissions`` in the background; read ``(index, result)`` pairs as they finish.

        At most ``Settings.max_concurrency`` submissions are in progress at once, and the input
        is read only as fast as results are taken, so a huge (lazy) input never fills memory.
        Leaving the block early cancels the rest and removes their containers::

            async with engine.judging(submissions) as results:
                async for index, result in results:
                    ...

        With ``deadline_s``, every submission has its result within that many seconds: those
        not finished by then (the container engine stuck, a container lost, a long queue) are
        not judged (``sandbox_error``, ``retryable``), never given a verdict.
        """
        async with judging_by(self._judging, submissions, deadline_s, self.settings.max_concurrency) as results:
            yield results

    @contextlib.asynccontextmanager
    async def _judging(
        self, submissions: Iterable[Submission]
    ) -> AsyncIterator[MemoryObjectReceiveStream[tuple[int, SubmissionResult]]]:
        send, receive = anyio.create_memory_object_stream[tuple[int, SubmissionResult]](self.settings.max_concurrency)
        async with anyio.create_task_group() as group:
            group.start_soon(self._feed, submissions, send)
            try:
                async with receive:
                    yield receive
            finally:
                group.cancel_scope.cancel()

    async def _feed(
        self, submissions: Iterable[Submission], send: MemoryObjectSendStream[tuple[int, SubmissionResult]]
    ) -> None:
        in_progress = anyio.Semaphore(self.settings.max_concurrency)

        async def judge_one(
            index: int, submission: Submission, out: MemoryObjectSendStream[tuple[int, SubmissionResult]]
        ) -> None:
            try:
                async with out:
                    await out.send((index, await self.judge(submission)))
            finally:
                in_progress.release()

        async with send, anyio.create_task_group() as group:
            for index, submission in enumerate(submissions):
                await in_progress.acquire()
                group.start_soon(judge_one, index, submission, send.clone())

    async def create_sandbox(
        self,
        *,
        language: Language = "python",
        template: str | None = None,
        snapshot: str | None = None,
        limits: Limits | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        volumes: Mapping[str, str] | None = None,
    ) -> Sandbox:
        """A long-lived container to run commands in and exchange files with, still without a
        network; it lives ``timeout_s`` (``Sandbox.set_timeout`` changes that) or until killed.
        ``template`` names one of the operator's templates (``airlock images build --template``),
        whose language it runs; ``snapshot`` one of ``sandboxes.snapshots()``, whose files it starts
        with and whose image it runs. ``volumes`` maps a path to the id of the volume
        (:attr:`volumes`) mounted there, its files the sandbox's user's."""
        if not self.info.supports_exec:
            raise RuntimeUnavailable(
                f"the {self._runtime.name} runtime runs jobs only; "
                "long-lived sandboxes need the docker or the oci runtime"
            )
        return await self.sandboxes.create(
            language,
            limits or self.limits,
            template=template,
            snapshot=snapshot,
            timeout_s=timeout_s,
            env=env,
            metadata=metadata,
            volumes=volumes,
        )

    async def _sandbox_container(self, spec: ContainerSpec) -> ContainerRef:
        """A started container for a sandbox: from the warm pool, but for one that mounts volumes,
        which no other sandbox's container would match."""
        return await (self._create(spec) if spec.policy.volumes else self.pool.take(spec))

    async def _sandbox_spec(
        self, language: Language, template: str | None, limits: Limits
    ) -> tuple[Language, ContainerSpec]:
        """What a sandbox of ``language``, or of the operator's ``template``, runs (and its
        language): asked again when a sandbox paused to disk resumes, maybe in another engine."""
        if template is None:
            image = await self.image_for(language)
        else:
            chosen = await self._template(template)
            language, image = chosen.language, chosen.tag
        spec = ContainerSpec(
            image=image,
            policy=policy_for(limits, self.settings.isolation, Purpose.SANDBOX),
            labels=self._owner.labels("sandbox"),
        )
        return language, spec

    @contextlib.asynccontextmanager
    async def sandbox(self, *, language: Language = "python", limits: Limits | None = None) -> AsyncIterator[Sandbox]:
        """:meth:`create_sandbox` for the length of a ``with`` block (and at most a day)."""
        sandbox = await self.create_sandbox(language=language, limits=limits, timeout_s=24 * 3600)
        try:
            yield sandbox
        finally:
            await self.sandboxes.kill(sandbox.id)

    async def prepare(self, language: Language, announce: Callable[[str], None] = lambda message: None) -> None:
        """Get ``language``'s image ready for this engine's runtime now rather than at the first job;
        ``announce`` hears about work that takes long (the OCI runtime unpacks an image once)."""
        await self._runtime.prepare(await self.image_for(language), announce)

    async def image_for(self, language: Language) -> str:
        """The local image tag for ``language``; raises ``ImageNotFound`` with the remedy."""
        if language not in self._images:
            base_id = None
            if self.settings.base_image:
                base_id = await self._runtime.image_id(self.settings.base_image)
            image = toolchain(language).image
            tag = image_tag(image, self.settings, base_id)
            if await self._runtime.image_id(tag) is None:
                raise ImageNotFound(
                    f"the image for {language} programs ({tag}) is not built; run `airlock images build {image}`"
                )
            self._images[language] = tag
        return self._images[language]

    async def templates(self) -> list[str]:
        """The names of the operator's templates built here on today's images."""
        found = await anyio.to_thread.run_sync(built_templates, self.settings)
        return [name for name, template in found.items() if template.current]

    async def _template(self, name: str) -> BuiltTemplate:
        found = await anyio.to_thread.run_sync(built_templates, self.settings)
        remedy = "build it with `airlock images build --template RECIPE`"
        if name not in found:
            raise ImageNotFound(f"no template {name!r} is built here (the templates are {sorted(found)}); {remedy}")
        if not found[name].current:
            raise ImageNotFound(f"template {name!r} stands on an older {found[name].language} image; {remedy}")
        return found[name]

    # -- the one path every job takes ------------------------------------------------------------

    async def run_harness(
        self, language: Language, request: HarnessRequest, limits: Limits, *, deadline_s: float | None = None
    ) -> HarnessRun:
        """Run ``request`` through the harness in a fresh container and collect its report.

        When the sandbox fails (the daemon is restarting, the container was killed from outside,
        its harness went silent), the job is retried, up to ``Settings.retries`` times with growing
        pauses; once some tests were reported, only the others run again (see ``_resumable``).
        After the last try the failure is the result. With ``deadline_s``, a job not done that
        many seconds from now ends as the sandbox's failure (retryable). Either way the job ends
        with exactly one outcome.
        """
        if deadline_s is None:
            return await self._run_harness(language, request, limits)
        with anyio.move_on_after(deadline_s):
            return await self._run_harness(language, request, limits)
        error = ErrorInfo(type="NotJudged", message=f"the deadline of {deadline_s:g} s passed before it was judged")
        return HarnessRun(observations=[], end=RunEnd.SANDBOX_ERROR, error=error, retryable=True)

    async def _run_harness(self, language: Language, request: HarnessRequest, limits: Limits) -> HarnessRun:
        pause = RETRY_PAUSE_S
        reported: list[Observation] = []
        # The index in ``request`` of each test of the part that is still to run.
        left = list(range(len(request.tests)))
        part = request
        for attempt in range(self.settings.retries + 1):
            run = await self._attempt(language, await self._payload(language, part), ReportReader(len(left)), limits)
            reported += [o.model_copy(update={"index": left[o.index]}) for o in run.observations]
            run = run.model_copy(update={"observations": sorted(reported, key=lambda o: o.index)})
            if not run.retryable or attempt == self.settings.retries or not _resumable(request, run):
                return run
            done = {o.index for o in run.observations}
            left = [index for index in left if index not in done]
            part = request.model_copy(update={"tests": [request.tests[index] for index in left]})
            await anyio.sleep(pause)
            pause = min(2 * pause, MAX_RETRY_PAUSE_S)
        raise AssertionError("unreachable")

    async def _payload(self, language: Language, request: HarnessRequest) -> bytes:
        """``request`` as the harness reads it (one line), once it is known to be sendable."""
        try:
            payload = request.model_dump_json().encode() + b"\n"
        except PydanticSerializationError:
            # Text that stands for raw bytes (surrogate escapes: a file Piston sent base64-encoded)
            # is no UTF-8; JSON's escapes carry it, and the harness writes those bytes back.
            payload = json.dumps(request.model_dump()).encode() + b"\n"
        if len(payload) > MAX_REQUEST_BYTES:
            raise ValueError(f"the job is {len(payload)} bytes; the limit is {MAX_REQUEST_BYTES}")
        with contextlib.suppress(RuntimeUnavailable):  # a missing image raises; an absent engine is retried
            await self.image_for(language)
        return payload

    async def _interact(self, submission: Submission, limits: Limits) -> Interaction:
        """Run an interactive submission and its interactor at once, in two containers, each
        one's output relayed as the other's input test by test.

        The pair is tried again, as one job, while the program reported no test and a side's
        failure was the sandbox's: an interactor that saw its input end when the program's
        container failed to start reported on nothing the program did.
        """
        assert submission.interactor is not None
        sides = (
            (submission.language, await self._payload(submission.language, plan(submission, limits)), limits),
            (
                submission.interactor.language,
                await self._payload(submission.interactor.language, plan_interactor(submission, limits)),
                interactor_limits_for(limits),
            ),
        )
        pause = RETRY_PAUSE_S
        for attempt in range(self.settings.retries + 1):
            interaction = await self._interact_once(sides, len(submission.tests), limits.output_bytes)
            program, interactor = interaction.program, interaction.interactor
            if program.observations or attempt == self.settings.retries:
                return interaction
            if not (program.retryable or interactor.retryable):
                return interaction
            await anyio.sleep(pause)
            pause = min(2 * pause, MAX_RETRY_PAUSE_S)
        raise AssertionError("unreachable")

    async def _interact_once(
        self, sides: tuple[tuple[Language, bytes, Limits], ...], tests: int, kept_bytes: int
    ) -> Interaction:
        feeds = (HarnessFeed(), HarnessFeed())  # the program's stdin, the interactor's
        readers = (ReportReader(tests, feeds[1], kept_bytes), ReportReader(tests, feeds[0]))
        runs: dict[int, HarnessRun] = {}

        async def side(which: int, slot: Slot) -> None:
            language, payload, limits = sides[which]
            try:
                runs[which] = await self._attempt(language, payload, readers[which], limits, feeds[which], slot)
            finally:
                # Once one side has ended, the other's stdin ends with it.
                feeds[1 - which].close()

        taken = await self._take_slots(2)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(side, 0, "held")
                group.start_soon(side, 1, "held" if taken == 2 else "beyond")
        finally:
            for feed in feeds:
                feed.release()
        program_ended, interactor_ended = readers[0].reported_at, readers[1].reported_at
        first = {
            index
            for index, ended in enumerate(interactor_ended)
            if index >= len(program_ended) or ended < program_ended[index]
        }
        return Interaction(runs[0], runs[1], first)

    async def _take_slots(self, wanted: int) -> int:
        """Take ``wanted`` slots (at most all there are) as one, so that two jobs that each need
        two never hold one apiece waiting for the other's; how many it took."""
        wanted = min(wanted, self.settings.max_concurrency)
        taken = 0
        self._waiting += 1
        try:
            async with self._pairing:
                for _ in range(wanted):
                    await self._slots.acquire()
                    taken += 1
        except BaseException:
            for _ in range(taken):
                self._slots.release()
            raise
        finally:
            self._waiting -= 1
        return taken

    async def _attempt(
        self,
        language: Language,
        payload: bytes,
        reader: ReportReader,
        limits: Limits,
        more_input: HarnessFeed | None = None,
        slot: Slot = "take",
    ) -> HarnessRun:
        """One job in one container. ``slot``: whether it takes a slot, holds one taken for it
        (given back with the container all the same), or runs beyond them (an interactor when
        there is one slot)."""
        tests = reader.expected_tests
        # Each step's wall-clock backstop, and the time a busy machine kept it waiting, which
        # the harness gives back (up to STARVED_ALLOWANCE times the backstop).
        stretch = 1 + STARVED_ALLOWANCE
        deadline_s = START_ALLOWANCE_S + stretch * (
            limits.compile_wall_time_s + (tests + 1) * (limits.wall_time_s + PER_TEST_OVERHEAD_S)
        )
        report_limit = FRAME_FIXED_BYTES + tests * (FRAME_EXPANSION * limits.output_bytes + FRAME_FIXED_BYTES)
        if slot == "take":
            await self._take_slots(1)
        release = slot != "beyond"
        try:
            spec = ContainerSpec(
                image=await self.image_for(language),
                policy=policy_for(
                    limits, self.settings.isolation, Purpose.JOB, runs_builds=toolchain(language).runs_builds
                ),
                labels=self._owner.labels("job"),
            )
            asked = time.monotonic()
            container = await self.pool.take(spec)
            if self.observer is not None:
                self.observer.container_ready(time.monotonic() - asked)
        except BaseException as exc:
            if release:
                self._slots.release()
            if isinstance(exc, EngineError):
                return _infrastructure_failure(reader, exc)
            raise
        started = time.monotonic()
        silence_s = SILENCE_ALLOWANCE_S + limits.wall_time_s
        exchange: Exchange | None = None
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + deadline_s + RUNTIME_GRACE_S) as listening:
                reader.last_heard = started
                self._listening[listening] = (reader, silence_s)
                try:
                    exchange = await self._runtime.communicate(
                        container,
                        payload,
                        deadline_s=deadline_s,
                        stdout_limit=report_limit,
                        stderr_limit=HARNESS_STDERR_BYTES,
                        on_stdout_line=reader,
                        more_input=more_input,
                    )
                finally:
                    del self._listening[listening]
        except EngineError as exc:
            return _infrastructure_failure(reader, exc)
        finally:
            # Removal is off the job's path; the slot stays taken until the container is gone.
            assert self._tasks is not None
            self._tasks.start_soon(self._retire, container, release)
            if self.observer is not None:
                self.observer.job_finished(time.monotonic() - started)
        if exchange is None:
            return self._unanswered(reader, silence_s)
        return _harness_run(reader, exchange)

    def _unanswered(self, reader: ReportReader, silence_s: float) -> HarnessRun:
        silence_s = _allowed_silence(reader, silence_s)
        if time.monotonic() - reader.last_heard > silence_s:
            # Retried like a container killed from outside (the tests it did not report, see _resumable).
            message = f"the sandbox stopped answering (its harness was silent for over {silence_s:g} s)"
            error = ErrorInfo(type="SandboxError", message=message)
            return HarnessRun(observations=reader.observations, end=RunEnd.SANDBOX_ERROR, error=error, retryable=True)
        # Not retried: a runtime that ignored one deadline would likely ignore the next.
        message = f"the {self._runtime.name} runtime did not end the job {RUNTIME_GRACE_S:.0f} s past its deadline"
        error = ErrorInfo(type="SandboxError", message=message)
        return HarnessRun(observations=reader.observations, end=RunEnd.SANDBOX_ERROR, error=error, retryable=False)

    async def _watch_silence(self, scope: anyio.CancelScope) -> None:
        """Cancel the exchange of every job whose harness has gone silent (see ``SILENCE_ALLOWANCE_S``)."""
        with scope:
            while True:
                await anyio.sleep(SILENCE_CHECK_S)
                now = time.monotonic()
                for scope, (reader, silence_s) in list(self._listening.items()):
                    if now - reader.last_heard > _allowed_silence(reader, silence_s):
                        scope.cancel()

    async def _retire(self, container: ContainerRef, release: bool) -> None:
        try:
            await self._remove(container)
        finally:
            if release:
                self._slots.release()

    async def _create(self, spec: ContainerSpec) -> ContainerRef:
        container = await self._runtime.create(spec)
        self._live[container.id] = container
        return container

    async def _remove(self, container: ContainerRef) -> None:
        """Remove a container; one that cannot be removed now stays listed for the next attempt."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(REMOVE_TIMEOUT_S):
            try:
                await self._runtime.remove(container)
            except EngineError:
                return
            self._live.pop(container.id, None)


def _default_runtime(settings: Settings, owner: Owner) -> Runtime:
    uids = UidPool(settings.sandbox_uid_first, settings.sandbox_uid_count)
    if settings.runtime == "oci":
        return OciRuntime(owner, uids, docker_host=settings.docker_host, binary=settings.oci_runtime)
    return DockerRuntime(
        owner,
        uids,
        base_url=settings.docker_host,
        max_streams=settings.max_concurrency,
        oci_binary=settings.oci_runtime,
    )


def _sandbox_error(exc: BaseException) -> ErrorInfo:
    return ErrorInfo(type=type(exc).__name__, message=str(exc))


def _resumable(request: HarnessRequest, run: HarnessRun) -> bool:
    """Whether the tests ``run`` did not report may run in a new container: each test starts from
    the program as loaded, so a test stands alone, unless all share one process in the prime mode
    (as the reference runs them) or the harness might have stopped after a failure it reported.
    Tests that share a process otherwise go on from the program loaded afresh, as they do after
    a test that ended that process."""
    if not run.observations:
        return True
    if len(run.observations) >= len(request.tests) or request.mode == "prime":
        return False
    return not (request.stop_on_first_failure and any(o.status is not Status.OK for o in run.observations))


def _allowed_silence(reader: ReportReader, silence_s: float) -> float:
    """How long ``reader``'s harness may stay silent: ``silence_s`` once it has read its request."""
    return silence_s if reader.greeted else min(silence_s, GREETING_ALLOWANCE_S)


def _infrastructure_failure(reader: ReportReader, exc: EngineError) -> HarnessRun:
    # A missing image stays missing; a daemon that went away may come back.
    retryable = not isinstance(exc, ImageNotFound)
    return HarnessRun(
        observations=reader.observations, end=RunEnd.SANDBOX_ERROR, error=_sandbox_error(exc), retryable=retryable
    )


def _harness_run(reader: ReportReader, exchange: Exchange) -> HarnessRun:
    observations = reader.observations
    if reader.finished and reader.error is None:
        return HarnessRun(observations=observations, end=RunEnd.COMPLETE)
    if exchange.oom_killed:
        error = ErrorInfo(type="MemoryLimit", message="the container ran out of memory")
        return HarnessRun(observations=observations, end=RunEnd.MEMORY_LIMIT, error=error)
    if exchange.timed_out:
        error = ErrorInfo(type="Timeout", message="the container passed its deadline")
        return HarnessRun(observations=observations, end=RunEnd.TIMEOUT, error=error)
    try:
        reader.check(bytes(exchange.stdout))
        reason = f"the harness ended its report early (container exit status {exchange.exit_code})"
    except EngineError as exc:
        reason = str(exc)
    if exchange.stdout_truncated:
        reason = "the harness's report exceeded its size limit"
    stderr = exchange.stderr.decode("utf-8", errors="replace")
    error = ErrorInfo(type="HarnessProtocolError", message=reason, traceback=stderr)
    # Killed from outside (SIGKILL, SIGTERM), or the daemon lost track of it: worth another try.
    # A harness that exited on its own would do the same again.
    retryable = exchange.exit_code in (None, 128 + 9, 128 + 15)
    return HarnessRun(observations=observations, end=RunEnd.SANDBOX_ERROR, error=error, retryable=retryable)
