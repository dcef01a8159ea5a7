"""The ``airlock`` command: parses flags into core models, calls the engine, prints results."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import re
import shutil
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from ._engine import Engine
from ._errors import EngineError
from ._languages import LANGUAGE_NAMES, toolchain
from ._limits import Limits
from ._models import Language, Outcome, RunResult
from ._settings import Settings
from ._version import __version__
from .distributed import RayEngine
from .runtime import OCI_BINARIES, OciRuntime
from .runtime._archive import load_images, save_images
from .runtime._images import IMAGES, build_images, image_status
from .runtime._templates import build_template, read_recipe, template_statuses
from .sandboxes._paused import hold_directory, let_go_of_directory

if TYPE_CHECKING:
    from .judge._score import ScoreReport

__all__ = ["main"]

# Exit statuses of the command itself.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ENGINE = 0, 1, 2, 3
DEFAULT_SERVE_PORT = 49982

out = Console()
err = Console(stderr=True)


class UsageError(Exception):
    """Bad command-line input; the message says what to fix."""


def _limit_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("limits (defaults in parentheses)")
    for name, field in Limits.model_fields.items():
        kind = float if field.annotation in (float, "float") else int
        group.add_argument(
            f"--{name.replace('_', '-')}",
            type=kind,
            metavar=kind.__name__.upper(),
            help=f"{field.description} ({field.default})",
        )


def _sandbox_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runtime",
        choices=["docker", "oci"],
        help="docker: through the Docker daemon; oci: crun or runc directly (faster; root) (AIRLOCK_RUNTIME)",
    )
    parser.add_argument(
        "--oci-runtime",
        metavar="BINARY",
        help="the OCI runtime of the runc tier: crun, runc, or (oci runtime) a path; under docker a runtime "
        "registered with dockerd (default: crun where it can run, else runc) (AIRLOCK_OCI_RUNTIME)",
    )
    parser.add_argument(
        "--isolation",
        choices=["runc", "gvisor"],
        help="gvisor adds gVisor's kernel (scripts/setup --with-gvisor) (AIRLOCK_ISOLATION)",
    )


def _limits_from(args: argparse.Namespace) -> Limits:
    given = {name: getattr(args, name) for name in Limits.model_fields if getattr(args, name, None) is not None}
    return Limits(**given)


def _read_text(path: str, what: str) -> str:
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise UsageError(f"{what} {path!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {what} {path!r}: {exc}") from None


def _settings(args: argparse.Namespace) -> Settings:
    keys = ("debian_mirror", "base_image", "runtime", "oci_runtime", "isolation")
    overrides: dict[str, Any] = {key: value for key in keys if (value := getattr(args, key, None))}
    if getattr(args, "process_per_test", False):
        overrides["process_per_test"] = True
    if getattr(args, "command", None) == "run":
        overrides["pool_size"] = 0  # one job: nothing to keep warm
    if getattr(args, "command", None) != "serve":
        # Only a server keeps sandboxes: the paused ones in AIRLOCK_PAUSED_DIR are its alone.
        overrides["paused_dir"] = None
    return Settings(**overrides)


# -- commands ---------------------------------------------------------------------------------------


async def cmd_run(args: argparse.Namespace) -> int:
    code = _read_text(args.program, "program")
    stdin = _read_text(args.stdin, "stdin file") if args.stdin else ""
    limits = _limits_from(args)
    settings = _settings(args)
    await _build_missing_images(settings, {args.language})
    async with Engine(settings) as engine:
        await engine.prepare(args.language, announce=_announce)
        result = await engine.run(code, stdin=stdin, language=args.language, limits=limits)
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        _print_run(result)
    return EXIT_OK if result.outcome is Outcome.OK else EXIT_FAILED


def _print_run(result: RunResult) -> None:
    _write_program_output(sys.stdout, result.stdout)
    _write_program_output(sys.stderr, result.stderr)
    wall_time_s = result.usage.wall_time_s or 0.0
    details = [f"outcome={result.outcome.value}", f"exit_code={result.exit_code}", f"wall={wall_time_s:.3f}s"]
    if result.signal is not None:
        details.append(f"signal={result.signal}")
    if result.usage.peak_memory_kb is not None:
        details.append(f"peak_memory={result.usage.peak_memory_kb / 1024:.1f}MiB")
    if result.stdout_truncated or result.stderr_truncated:
        details.append("output truncated")
    if result.error is not None and result.outcome is Outcome.SANDBOX_ERROR:
        details.append(f"error={result.error.message}")
    err.print("[dim]" + "  ".join(details) + "[/dim]", highlight=False)


# Every C0 and C1 control character but newline and tab: the start of every terminal escape
# sequence (ESC, CSI, OSC), bell, backspace, carriage return.
_TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _write_program_output(stream: TextIO, text: str) -> None:
    """Write what a program printed; to a terminal, with its control characters made visible.

    A program must not drive the operator's terminal: set the clipboard (OSC 52), the window
    title, clear the screen, or hide text. A pipe or file gets the output as it was.
    """
    if not text:
        return
    if stream.isatty():
        text = _TERMINAL_CONTROLS.sub(lambda match: f"\\x{ord(match.group()):02x}", text)
    stream.write(text)
    stream.flush()


def _status_table(statuses: Sequence[Any], *, contents: bool = False) -> Table:
    table = Table("image", "tag", "present", "size", *(["contents"] if contents else []))
    for status in statuses:
        size = f"{status.size_mb:.0f} MB" if status.size_mb is not None else "-"
        offered = [", ".join(status.contents) or "-"] if contents else []
        table.add_row(status.name, status.tag, "yes" if status.present else "no", size, *offered)
    return table


async def cmd_score(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from .judge._datasets import survey
    from .judge._score import ScoreOptions, score

    source, output = Path(args.input), Path(args.output)
    if not await anyio.Path(source).is_file():
        raise UsageError(f"input {args.input!r} does not exist")
    if await anyio.Path(output).resolve() == await anyio.Path(source).resolve():
        raise UsageError("the output file must not be the input file")
    if args.ray is None and args.runtime is None and "AIRLOCK_RUNTIME" not in os.environ and _oci_usable():
        args.runtime = "oci"  # the faster runtime, when it can run here; it passes the same attack suite
    settings = _settings(args)
    if args.concurrency:
        settings = settings.model_copy(update={"max_concurrency": args.concurrency})
    options = ScoreOptions(
        comparator=args.comparator,
        limits=_limits_from(args) if any(getattr(args, n, None) is not None for n in Limits.model_fields) else None,
        stop_on_first_failure=args.stop_on_first_failure,
        language=args.language,
        resume=args.resume,
        details=args.details,
        deadline_s=args.deadline_s,
        pass_at=args.pass_at,
    )
    total, languages = await anyio.to_thread.run_sync(survey, source, args.language)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    async with _judge_for(args, settings, languages) as judge:
        with Progress(*columns, console=err, transient=True, disable=args.quiet) as bar:
            task = bar.add_task("judging", total=total)
            started = time.monotonic()

            def advance(step: int) -> None:
                bar.advance(task, step)
                if isinstance(judge, RayEngine):
                    bar.update(task, description=f"judging ({_node_rates(judge, time.monotonic() - started)})")

            report = await score(judge, source, output, options, progress=advance)
        if isinstance(judge, RayEngine):
            err.print(_nodes_table(judge, report.elapsed_s))
    err.print(_score_table(report, output.name))
    if args.summary_json:
        await anyio.Path(args.summary_json).write_text(report.model_dump_json(indent=2) + "\n")
    return EXIT_OK


def _score_table(report: ScoreReport, output_name: str) -> Table:
    table = Table("verdict", "submissions", title=f"results in {output_name}")
    for verdict, count in sorted(report.verdicts.items(), key=lambda item: -item[1]):
        table.add_row(verdict, str(count))
    if report.invalid:
        table.add_row("invalid input", str(report.invalid))
    if report.not_judged:
        table.add_row("not judged (the sandbox's failure: retryable)", str(report.not_judged))
    if report.resumed:
        table.add_row("already in output (--resume)", str(report.resumed))
    rate = report.judged / max(report.elapsed_s, 1e-9)
    table.caption = (
        f"{report.judged} judged in {report.elapsed_s:.1f} s ({rate:.1f}/s); "
        f"tests passed {report.tests_passed}/{report.tests_total}"
    )
    if report.tasks < report.results:
        estimates = ", ".join(f"pass@{k} {v:.4f}" for k, v in report.pass_at_k.items())
        table.caption += f"\n{report.tasks} tasks: {estimates}"
    if report.mean_points is not None:
        table.caption += f"\nmean points {report.mean_points:.2f} of {report.max_points:.2f}"
    return table


@contextlib.asynccontextmanager
async def _judge_for(
    args: argparse.Namespace, settings: Settings, languages: set[Language]
) -> AsyncIterator[Engine | RayEngine]:
    """This machine's engine, its images built and unpacked first; or, with ``--ray``, the
    cluster's (each node builds what it lacks)."""
    if args.ray is not None:
        async with RayEngine(args.ray, settings) as cluster:
            yield cluster
        return
    await _build_missing_images(settings, languages)
    async with Engine(settings) as engine:
        for language in sorted(languages):
            await engine.prepare(language, announce=_announce)
        yield engine


def _node_rates(engine: RayEngine, elapsed_s: float) -> str:
    rates = [
        f"{node.node_id[:6]} {node.judged / max(elapsed_s, 1e-9):.1f}/s" if node.alive else f"{node.node_id[:6]} out"
        for node in engine.nodes()
    ]
    return ", ".join(rates)


def _nodes_table(engine: RayEngine, elapsed_s: float) -> Table:
    table = Table("node", "host", "slots", "judged", "per second", "state", title="nodes")
    for node in engine.nodes():
        state = "ok" if node.alive else f"out: {node.reason}"
        rate = f"{node.judged / max(elapsed_s, 1e-9):.1f}"
        table.add_row(node.node_id[:12], node.host, str(node.slots), str(node.judged), rate, state)
    return table


def _ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas, got {text!r}") from None
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"every k must be 1 or more, got {text!r}")
    return ks


def _announce(message: str) -> None:
    err.print(f"[dim]{message}[/dim]", highlight=False)


def _oci_usable() -> bool:
    return os.geteuid() == 0 and any(shutil.which(binary) for binary in OCI_BINARIES)


async def _build_missing_images(settings: Settings, languages: set[Language]) -> None:
    """Build, once, the images these languages need and this machine lacks: a language's image
    is built when it is first needed (minutes), never for a user who does not need it."""
    wanted = {toolchain(language).image for language in languages}
    statuses = await anyio.to_thread.run_sync(image_status, settings)
    missing = sorted(s.name for s in statuses if s.name in wanted and not s.present)
    if missing:
        _announce(
            f"building the {', '.join(missing)} image{'s' if len(missing) > 1 else ''} (first use; a few minutes)"
        )
        await anyio.to_thread.run_sync(lambda: build_images(settings, missing, log=lambda line: None))


async def cmd_images_build(args: argparse.Namespace) -> int:
    settings = _settings(args)
    log: Callable[[str], None] = (
        (lambda line: err.print(line, highlight=False, markup=False)) if args.verbose else (lambda line: None)
    )
    recipes = [read_recipe(Path(path)) for path in args.templates]
    # A template stands on its language's image, which is built first when missing.
    under_templates = [toolchain(recipe.language).image for recipe in recipes]
    wanted = list(IMAGES) if args.all else args.images or ([] if recipes else ["python"])
    unknown = sorted(set(wanted) - set(IMAGES))
    if unknown:
        err.print(f"no image is called {', '.join(unknown)}; the images are {', '.join(IMAGES)}")
        return EXIT_USAGE
    wanted = [*wanted, *(image for image in under_templates if image not in wanted)]
    missing = [s for s in await anyio.to_thread.run_sync(image_status, settings) if not s.present]
    missing = [s for s in missing if s.name in (*wanted, "base", "core")]
    if missing or args.force:
        err.print(f"building {', '.join(s.name for s in missing) or ', '.join(wanted)} (this takes a few minutes)")
    statuses = await anyio.to_thread.run_sync(lambda: build_images(settings, wanted, force=args.force, log=log))
    for path in args.templates:
        built = await anyio.to_thread.run_sync(
            functools.partial(build_template, settings, Path(path), force=args.force, log=log)
        )
        err.print(f"template {built.name}: {built.tag}")
    if missing or args.force or args.verbose:
        out.print(_status_table(statuses))
    await _unpack_for_the_oci_runtime(settings, wanted, verbose=args.verbose)
    return EXIT_OK


async def _unpack_for_the_oci_runtime(
    settings: Settings, images: Iterable[str], *, verbose: bool, remove_stale: bool = True
) -> None:
    """Unpacked now, an image costs the first `airlock score` nothing."""
    if not _oci_usable():
        return
    async with Engine(settings.model_copy(update={"runtime": "oci", "pool_size": 0})) as engine:
        for image in images:
            await engine.prepare(next(n for n in LANGUAGE_NAMES if toolchain(n).image == image), announce=_announce)
        # Unpacked images of removed builds are a gigabyte each; nothing uses them again.
        runtime = engine.runtime
        if remove_stale and isinstance(runtime, OciRuntime):
            removed = await runtime.remove_stale_images()
            if removed and verbose:
                err.print(f"removed {len(removed)} stale unpacked images")


async def cmd_images_save(args: argparse.Namespace) -> int:
    settings, destination = _settings(args), Path(args.file)
    if not await anyio.Path(destination.parent).is_dir():
        raise UsageError(f"the folder of {args.file!r} does not exist")
    manifest = await anyio.to_thread.run_sync(
        lambda: save_images(settings, destination, args.images, log=lambda line: err.print(line, highlight=False))
    )
    size_gb = (await anyio.Path(destination).stat()).st_size / 1e9
    out.print(f"wrote {destination} ({size_gb:.2f} GB): {', '.join(image.name for image in manifest.images)}")
    return EXIT_OK


async def cmd_images_load(args: argparse.Namespace) -> int:
    settings, source = _settings(args), Path(args.file)
    if not await anyio.Path(source).is_file():
        raise UsageError(f"{args.file!r} does not exist")
    manifest = await anyio.to_thread.run_sync(
        lambda: load_images(settings, source, log=lambda line: err.print(line, highlight=False))
    )
    out.print(_status_table(await anyio.to_thread.run_sync(image_status, settings)))
    languages = [image.name for image in manifest.images if image.name in IMAGES]
    # What this archive lacks may still be in use here: only a build knows what is stale.
    await _unpack_for_the_oci_runtime(settings, languages, verbose=False, remove_stale=False)
    return EXIT_OK


async def cmd_images_list(args: argparse.Namespace) -> int:
    settings = _settings(args)
    statuses = await anyio.to_thread.run_sync(functools.partial(image_status, settings, contents=True))
    templates = await anyio.to_thread.run_sync(template_statuses, settings)
    out.print(_status_table([*statuses, *templates], contents=True))
    return EXIT_OK


async def cmd_gc(args: argparse.Namespace) -> int:
    removed = []
    for runtime in ("docker", "oci"):
        settings = _settings(args).model_copy(update={"runtime": runtime, "pool_size": 0})
        try:
            async with Engine(settings) as engine:
                removed += await engine.runtime.remove_leftovers(everything=args.all)
        except EngineError as exc:
            if runtime == "docker":
                raise
            err.print(f"[dim]skipped the OCI runtime: {exc}[/dim]")
    out.print(f"removed {len(removed)} container(s)")
    return EXIT_OK


async def cmd_doctor(args: argparse.Namespace) -> int:
    from ._doctor import run_checks

    settings = _settings(args)
    # Every runtime a command here would use: the library's default, and the OCI runtime that
    # `airlock score` prefers where it can run.
    runtimes = [args.runtime] if args.runtime else ["docker", *(["oci"] if _oci_usable() else [])]
    table = Table("runtime", "check", "result", "detail")
    healthy = True
    for runtime in runtimes:
        checks = await run_checks(settings.model_copy(update={"runtime": runtime, "pool_size": 0}))
        for check in checks:
            verdict = (
                "[green]ok[/green]" if check.ok else "[yellow]absent[/yellow]" if check.optional else "[red]FAIL[/red]"
            )
            table.add_row(runtime, check.name, verdict, check.detail)
            healthy = healthy and (check.ok or check.optional)
    out.print(table)
    return EXIT_OK if healthy else EXIT_FAILED


async def cmd_serve(args: argparse.Namespace) -> int:
    import ipaddress

    import uvicorn

    from .serve import ServeOptions, create_app, serving
    from .serve._logs import log_config

    keys = frozenset(args.api_key or [])
    try:
        loopback = args.host == "localhost" or ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = False
    if not keys and not loopback and not args.insecure:
        raise UsageError(
            f"refusing to serve on {args.host} without an API key: pass --api-key KEY (repeatable), "
            "or --insecure to accept any key"
        )
    chosen = {"max_sandboxes": args.max_sandboxes, "paused_dir": args.paused_dir}
    settings = _settings(args).model_copy(update={key: value for key, value in chosen.items() if value})
    settings = serving(settings)
    options = ServeOptions(
        api_keys=keys,
        limits=_limits_from(args),
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        max_pending=args.max_pending,
        key_concurrency=args.key_concurrency,
        key_sandboxes=args.key_sandboxes,
        ray_address=args.ray,
    )
    ports = args.port or [DEFAULT_SERVE_PORT]
    listeners = [_listener(args.host, port) for port in ports]
    config = uvicorn.Config(
        create_app(options, settings),
        host=args.host,
        port=ports[0],
        log_config=log_config(args.log_level),
        log_level=args.log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=args.drain_s,
    )
    # Held here as well as by the engine the app opens: another server's hold is then this
    # command's error, not a traceback from the app's start.
    assert settings.paused_dir is not None  # serving() gives every server one
    hold_directory(settings.paused_dir)
    try:
        # One app on every port: E2B's debug mode (e2b 1.x, reward-kit) wants the control plane
        # on 3000 and envd on 49983, which one listener cannot be.
        await uvicorn.Server(config).serve(sockets=listeners)
    finally:
        let_go_of_directory(settings.paused_dir)
    return EXIT_OK


def _listener(host: str, port: int) -> socket.socket:
    """A bound TCP socket for the server. Its protocol is named (``IPPROTO_TCP``, not 0): asyncio
    turns Nagle's algorithm off only on connections whose socket says TCP, and with it on, every
    answer written in two parts (headers, then body) waited for the client's delayed ACK: 40 ms
    on each request (a warm ``run_code`` took 44 ms instead of 6)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return listener


# -- parser ---------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airlock",
        description="Run untrusted code in hardened containers and judge it: one program, a data set, or a server.",
        epilog="airlock COMMAND --help shows a command's flags. Start with: airlock doctor",
    )
    parser.add_argument("--version", action="version", version=f"airlock {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run one program in a fresh sandbox")
    run.add_argument("program", help="the program's source file")
    run.add_argument("--stdin", metavar="FILE", help="file to feed the program as standard input")
    run.add_argument("--language", default="python", choices=LANGUAGE_NAMES)
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    _sandbox_flags(run)
    _limit_flags(run)
    run.set_defaults(handler=cmd_run)

    score = commands.add_parser(
        "score",
        help=(
            "judge a JSONL data set (native, APPS/TACO, HumanEval(-X), MBPP, MultiPL-E, LiveCodeBench,"
            " CodeContests, BigCodeBench)"
        ),
    )
    score.add_argument("input", help="JSONL file, one submission per line")
    score.add_argument("-o", "--output", required=True, help="JSONL file for the results, one line per input")
    score.add_argument("--concurrency", type=int, help="submissions in flight at once (default: 2 per core)")
    score.add_argument(
        "--language", default="python", choices=LANGUAGE_NAMES, help="of records without a language field"
    )
    score.add_argument(
        "--resume", action="store_true", help="skip input lines already in the output (same input) and append the rest"
    )
    score.add_argument(
        "--comparator",
        choices=["standard", "prime"],
        default="standard",
        help="how outputs are compared (docs/reference.md)",
    )
    score.add_argument("--stop-on-first-failure", action="store_true", help="skip a submission's tests after a failure")
    score.add_argument(
        "--process-per-test",
        action="store_true",
        help="each test of a Python submission in a process of its own, so that no test's memory reaches the next "
        "(about three times the CPU per test; default: one after another in one process, as the unsafe references "
        "run them; a record's own process_per_test wins)",
    )
    score.add_argument(
        "--details",
        choices=["all", "failures", "summary"],
        default="failures",
        help="per-test records: all, outputs only for failed tests (default), or none",
    )
    score.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    score.add_argument(
        "--pass-at",
        type=_ks,
        default=(1, 10, 100),
        metavar="K,K",
        help="the k of pass@k, reported when lines share an id (several samples of a task) (1,10,100)",
    )
    score.add_argument("--summary-json", metavar="FILE", help="also write the summary (verdicts, pass@k) as JSON")
    score.add_argument(
        "--deadline-s",
        type=float,
        metavar="SECONDS",
        help="every line has its result by then; those the sandbox could not finish are marked not judged "
        "(retryable), never given a verdict",
    )
    score.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="judge on a Ray cluster's nodes (auto: the one this machine belongs to); needs airlock[ray]",
    )
    _sandbox_flags(score)
    _limit_flags(score)
    score.set_defaults(handler=cmd_score)

    images = commands.add_parser("images", help="build, list, save or load the sandbox images")
    images_commands = images.add_subparsers(dest="images_command", required=True, metavar="ACTION")
    build = images_commands.add_parser("build", help="build missing or stale images (no registry needed)")
    build.add_argument(
        "images", nargs="*", metavar="IMAGE", help=f"which to build: {', '.join(IMAGES)} (default: python)"
    )
    build.add_argument("--all", action="store_true", help="build every image")
    build.add_argument(
        "--template",
        dest="templates",
        action="append",
        default=[],
        metavar="RECIPE",
        help="also build the sandbox template this TOML recipe describes (repeatable)",
    )
    build.add_argument("--force", action="store_true", help="rebuild even when up to date")
    build.add_argument("--mirror", dest="debian_mirror", help="Debian mirror for debootstrap and apt")
    build.add_argument("--base-image", help="build on this existing local image instead of debootstrap")
    build.add_argument("--verbose", "-v", action="store_true", help="show the build log")
    build.set_defaults(handler=cmd_images_build)
    listing = images_commands.add_parser("list", help="show which images exist")
    listing.set_defaults(handler=cmd_images_list)
    save = images_commands.add_parser(
        "save", help="write built images to one verified file, for machines that cannot build them"
    )
    save.add_argument("file", metavar="FILE", help="where to write the archive")
    save.add_argument(
        "images", nargs="*", metavar="IMAGE", help="which to save, with the base and core (default: every built one)"
    )
    save.set_defaults(handler=cmd_images_save)
    load = images_commands.add_parser("load", help="check a file `airlock images save` wrote, then load its images")
    load.add_argument("file", metavar="FILE", help="the archive")
    load.set_defaults(handler=cmd_images_load)

    gc = commands.add_parser("gc", help="remove containers that crashed engine runs left behind")
    gc.add_argument("--all", action="store_true", help="remove every container of ours, even live ones")
    gc.set_defaults(handler=cmd_gc)

    serve = commands.add_parser(
        "serve",
        help="serve over HTTP: E2B's API for its unmodified SDKs, SandboxFusion, Piston and a batch judging API",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument(
        "--port", type=int, action="append", help=f"port to listen on, repeatable ({DEFAULT_SERVE_PORT})"
    )
    serve.add_argument("--api-key", action="append", metavar="KEY", help="accept this X-API-KEY (repeatable)")
    serve.add_argument(
        "--insecure", action="store_true", help="listen beyond loopback without API keys, accepting any key"
    )
    serve.add_argument("--max-sandboxes", type=int, help="sandboxes alive at once (64) (AIRLOCK_MAX_SANDBOXES)")
    serve.add_argument(
        "--paused-dir",
        type=Path,
        help="where sandboxes paused to disk keep their files across restarts, one server each (AIRLOCK_PAUSED_DIR; "
        "default ~/.local/state/airlock/paused)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="JSON lines on stderr; info logs every request (info)",
    )
    serve.add_argument("--max-body-mb", type=float, default=64, help="largest request body accepted (64)")
    serve.add_argument(
        "--max-pending", type=int, default=256, help="run_code/execute/judge requests in progress; beyond: 429 (256)"
    )
    serve.add_argument("--key-concurrency", type=int, help="such requests in progress per API key (no quota)")
    serve.add_argument(
        "--key-sandboxes",
        type=int,
        help="E2B sandboxes alive at once per API key (with several keys: an equal share of --max-sandboxes)",
    )
    serve.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="judge the batch API's submissions on a Ray cluster's nodes (auto: this machine's); needs airlock[ray]",
    )
    serve.add_argument(
        "--drain-s", type=float, default=30, help="on Ctrl-C or SIGTERM, time for requests in progress to finish (30)"
    )
    _sandbox_flags(serve)
    _limit_flags(serve)
    serve.set_defaults(handler=cmd_serve, runtime="docker")

    doctor = commands.add_parser("doctor", help="check that the engine, images and isolation work")
    _sandbox_flags(doctor)
    doctor.set_defaults(handler=cmd_doctor)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], Coroutine[Any, Any, int]] = args.handler
    try:
        return _unwrapped(anyio.run, handler, args)
    except UsageError as exc:
        err.print(f"airlock: {exc}", highlight=False)
        return EXIT_USAGE
    except ValidationError as exc:
        err.print(f"airlock: invalid input:\n{_format_validation(exc)}", highlight=False)
        return EXIT_USAGE
    except ValueError as exc:
        err.print(f"airlock: {exc}", highlight=False)
        return EXIT_USAGE
    except EngineError as exc:
        err.print(f"airlock: {exc}", highlight=False)
        return EXIT_ENGINE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`airlock run ... | head`); there is nobody left to tell.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED


def _unwrapped(run: Callable[..., int], *args: Any) -> int:
    """``run(*args)``, with an engine error that concurrent tasks raised (an image missing for
    each of several jobs) raised as itself, so that the user reads its message, not a traceback."""
    try:
        return run(*args)
    except BaseExceptionGroup as group:
        found: BaseException | None = group.subgroup(EngineError)
        while isinstance(found, BaseExceptionGroup) and found.exceptions:
            found = found.exceptions[0]
        if isinstance(found, EngineError):
            raise found from None
        raise


def _format_validation(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "input"
        lines.append(f"  {where}: {error['msg']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
