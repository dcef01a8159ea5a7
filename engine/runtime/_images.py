"""Sandbox images, built without any registry.

The base root filesystem comes from Debian packages (``debootstrap`` into a folder, loaded
with ``docker import``), or is an existing local image the user names. The core image is a
``docker build`` on top of it (Python and the in-image harness); each toolchain's image (one
serves C and C++, one JavaScript and TypeScript) is a build on top of the core. Every tag
carries a hash of its recipe and its parents', so a changed recipe builds anew and an
unchanged one is never rebuilt. Only the images asked for are built: a Python user never pays
for a JDK.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.models.images
from pydantic import BaseModel, ConfigDict

from .._errors import ImageBuildError, ImageNotFound
from .._settings import Settings
from ._dockerapi import connect
from ._labels import MANAGED
from ._resources import resource_path

__all__ = [
    "IMAGES",
    "ImageStatus",
    "base_id_of",
    "build_images",
    "build_recipe_image",
    "image_status",
    "image_tag",
    "scratch_dir",
]

# The images there are, by the folder of images/ that holds each recipe; every one stands on the core.
IMAGES: tuple[str, ...] = ("python", "cpp", "java", "javascript", "go", "rust")
CORE = "core"
RECIPE_LABEL = "io.airlock.recipe"
HARNESS_DIR = Path(__file__).resolve().parent.parent / "harness"
HARNESS_PACKAGE = "airlock_harness"
Log = Callable[[str], None]
PARALLEL_BUILDS = 3


class ImageStatus(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    tag: str
    present: bool
    size_mb: float | None = None
    contents: tuple[str, ...] = ()


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:12]


def _harness_files() -> list[Path]:
    """The harness's sources, as paths relative to its folder."""
    found = [*HARNESS_DIR.rglob("*.py"), *HARNESS_DIR.rglob("*.js")]
    return sorted(p.relative_to(HARNESS_DIR) for p in found if "__pycache__" not in p.parts)


@functools.cache
def _base_recipe() -> dict[str, Any]:
    recipe: dict[str, Any] = json.loads(resource_path("images", "base", "recipe.json").read_text())
    return recipe


def base_tag(settings: Settings, client: docker.DockerClient | None = None) -> str:
    if settings.base_image:
        return settings.base_image
    recipe = json.dumps({**_base_recipe(), "mirror": settings.debian_mirror}, sort_keys=True)
    return f"airlock/base:{_digest(recipe.encode())}"


def core_tag(settings: Settings, base_id: str | None = None) -> str:
    """The tag of the core image (Python, the harness, the sandbox user) for these settings.

    ``base_id`` pins a user-named base image by content, so rebuilding that base rebuilds ours.
    """
    harness = [str(p).encode() + (HARNESS_DIR / p).read_bytes() for p in _harness_files()]
    base = (base_id or base_tag(settings)).encode()
    users = json.dumps(_user_args(settings), sort_keys=True).encode()
    return f"airlock/{CORE}:{_digest(base, users, *_recipe(CORE), *harness)}"


def image_tag(image: str, settings: Settings, base_id: str | None = None) -> str:
    """The tag of one of :data:`IMAGES` for these settings."""
    return f"airlock/{image}:{_digest(core_tag(settings, base_id).encode(), *_recipe(image))}"


def _recipe(image: str) -> list[bytes]:
    return [path.name.encode() + path.read_bytes() for path in _recipe_files(image)]


def _user_args(settings: Settings) -> dict[str, str]:
    """The uids containers run as: the image names each of them ``user``."""
    return {"UID_FIRST": str(settings.sandbox_uid_first), "UID_COUNT": str(settings.sandbox_uid_count)}


def _recipe_files(image: str) -> list[Path]:
    """An image's recipe: its Dockerfile and the files it copies in, one folder."""
    folder = resource_path("images", image)
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


def _image(client: docker.DockerClient, tag: str) -> docker.models.images.Image | None:
    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def base_id_of(client: docker.DockerClient, settings: Settings) -> str | None:
    """The content id of a user-named base image (None for ours, whose tag is its recipe)."""
    if not settings.base_image:
        return None
    base = _image(client, settings.base_image)
    if base is None:
        raise ImageNotFound(
            f"the base image {settings.base_image!r} named by AIRLOCK_BASE_IMAGE does not exist locally"
        )
    return str(base.id)


# Where a language image lists what it offers: ``package version`` per line (see its Dockerfile).
CONTENTS_FILE = "/opt/airlock/contents"


def image_status(settings: Settings, *, contents: bool = False) -> list[ImageStatus]:
    """Whether each image these settings name is built; with ``contents``, what each offers."""
    client = connect(settings.docker_host)
    try:
        statuses = _statuses(client, settings)
        if contents:
            statuses = [
                s.model_copy(update={"contents": _contents(client, s.tag)}) if s.present and s.name in IMAGES else s
                for s in statuses
            ]
        return statuses
    finally:
        client.close()


def _contents(client: docker.DockerClient, tag: str) -> tuple[str, ...]:
    """An image's list of what it offers, read from its file system without running it."""
    container = client.containers.create(tag, ["true"], labels={MANAGED: "true"}, network_disabled=True)
    try:
        stream, _ = container.get_archive(CONTENTS_FILE)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            member = archive.extractfile(archive.getmembers()[0])
            text = member.read().decode() if member is not None else ""
        return tuple(line.strip() for line in text.splitlines() if line.strip())
    except docker.errors.NotFound:
        return ()
    finally:
        container.remove(force=True)


def _statuses(client: docker.DockerClient, settings: Settings) -> list[ImageStatus]:
    base = base_tag(settings)
    found = _image(client, base)
    statuses = [ImageStatus(name="base", tag=base, present=found is not None, size_mb=_size(found))]
    try:
        base_id = base_id_of(client, settings)
    except ImageNotFound:
        return [*statuses, *(ImageStatus(name=n, tag="(needs the base image)", present=False) for n in (CORE, *IMAGES))]
    tags = {CORE: core_tag(settings, base_id), **{image: image_tag(image, settings, base_id) for image in IMAGES}}
    for name, tag in tags.items():
        found = _image(client, tag)
        statuses.append(ImageStatus(name=name, tag=tag, present=found is not None, size_mb=_size(found)))
    return statuses


def _size(image: docker.models.images.Image | None) -> float | None:
    return None if image is None else round(image.attrs.get("Size", 0) / 1e6, 1)


def build_images(
    settings: Settings, images: Iterable[str] = ("python",), *, force: bool = False, log: Log = print
) -> list[ImageStatus]:
    """Build those of ``images`` that are missing, with what they stand on (rebuild them with
    ``force``); return the resulting statuses."""
    unknown = sorted(set(images) - set(IMAGES))
    if unknown:
        raise ValueError(f"no image is called {', '.join(unknown)}; the images are {', '.join(IMAGES)}")
    client = connect(settings.docker_host)
    try:
        return _build(client, settings, [image for image in IMAGES if image in set(images)], force=force, log=log)
    finally:
        client.close()


def _build(
    client: docker.DockerClient, settings: Settings, images: list[str], *, force: bool, log: Log
) -> list[ImageStatus]:
    if not settings.base_image:
        tag = base_tag(settings)
        if force or _image(client, tag) is None:
            _build_base(client, tag, settings.debian_mirror, log)
    base_id = base_id_of(client, settings)
    core = core_tag(settings, base_id)
    if force or _image(client, core) is None:
        _build_image(client, CORE, core, {"BASE": base_tag(settings), **_user_args(settings)}, log)
        _remove_stale(client, core, log)
    wanted = {image: image_tag(image, settings, base_id) for image in images}
    missing = {image: tag for image, tag in wanted.items() if force or _image(client, tag) is None}

    def build_one(image: str) -> None:
        # A client per build: builds stream their logs over connections of their own.
        own = connect(settings.docker_host)
        try:
            _build_image(own, image, missing[image], {"BASE": core}, lambda line: log(f"[{image}] {line}"))
            _remove_stale(own, missing[image], log)
        finally:
            own.close()

    # The images stand on the core alone, and their builds wait on the mirror and the disk as
    # much as on a CPU: the five toolchains, three at once, took 129 s on 2 cores where one
    # after another took 160 s.
    with concurrent.futures.ThreadPoolExecutor(max_workers=PARALLEL_BUILDS) as builds:
        for built in [builds.submit(build_one, image) for image in missing]:
            built.result()
    return _statuses(client, settings)


def _remove_stale(client: docker.DockerClient, current: str, log: Log) -> None:
    """Delete our older builds of the same image; one still in use by a container stays."""
    repository = current.partition(":")[0]
    for image in client.images.list(name=repository, filters={"label": f"{MANAGED}=true"}):
        for tag in image.tags:
            if tag != current:
                try:
                    client.images.remove(tag)
                    log(f"removed stale image {tag}")
                except docker.errors.APIError:
                    continue


def _run(command: list[str], log: Log) -> None:
    log("$ " + " ".join(command))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-4000:]
        raise ImageBuildError(f"{command[0]} failed with status {result.returncode}:\n{tail}")


def _build_base(client: docker.DockerClient, tag: str, mirror: str, log: Log) -> None:
    recipe = _base_recipe()
    if shutil.which("debootstrap") is None:
        raise ImageBuildError(
            "debootstrap is not installed. Install it (apt-get install debootstrap), or name an "
            "existing local base image with AIRLOCK_BASE_IMAGE / --base-image"
        )
    if os.geteuid() != 0:
        raise ImageBuildError("debootstrap needs root. Run the build as root, or name a base image with --base-image")
    log(f"building {tag} from {mirror} (debootstrap {recipe['variant']} {recipe['suite']})")
    with scratch_dir() as scratch:
        rootfs = scratch / "rootfs"
        _run(
            [
                "debootstrap",
                f"--variant={recipe['variant']}",
                f"--components={','.join(recipe['components'])}",
                str(recipe["suite"]),
                str(rootfs),
                mirror,
            ],
            log,
        )
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / leftover).glob("*"):
                if entry.is_file():
                    entry.unlink()
        tarball = scratch / "rootfs.tar"
        _run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(tarball), "."], log)
        repository, _, version = tag.partition(":")
        try:
            client.api.import_image_from_file(
                str(tarball),
                repository=repository,
                tag=version,
                changes=[f"LABEL {MANAGED}=true", f"LABEL {RECIPE_LABEL}={version}"],
            )
        except docker.errors.APIError as exc:
            raise ImageBuildError(f"docker import failed: {exc.explanation or exc}") from exc
    if _image(client, tag) is None:
        raise ImageBuildError(f"docker import did not produce {tag}")


def _build_image(client: docker.DockerClient, image: str, tag: str, buildargs: dict[str, str], log: Log) -> None:
    with scratch_dir() as context:
        for path in _recipe_files(image):
            shutil.copy(path, context / path.name)
        if image == CORE:
            package = context / HARNESS_PACKAGE
            for source in _harness_files():
                (package / source).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(HARNESS_DIR / source, package / source)
        build_recipe_image(client, context, tag, buildargs, {}, log)


def build_recipe_image(
    client: docker.DockerClient, context: Path, tag: str, buildargs: dict[str, str], labels: dict[str, str], log: Log
) -> None:
    """``docker build`` of the recipe in ``context`` as ``tag``, on ``buildargs['BASE']``, with
    the mirror reachable and no registry."""
    log(f"building {tag} on {buildargs['BASE']}")
    tail: list[str] = []
    try:
        for chunk in client.api.build(
            path=str(context),
            tag=tag,
            buildargs=buildargs,
            rm=True,
            forcerm=True,
            pull=False,
            network_mode="host",
            decode=True,
            labels={**labels, MANAGED: "true", RECIPE_LABEL: tag.partition(":")[2]},
        ):
            line = str(chunk.get("stream") or chunk.get("status") or "").rstrip()
            if line:
                tail = [*tail[-40:], line]
                log(line)
            if "error" in chunk:
                raise ImageBuildError(f"building {tag} failed: {chunk['error']}\n" + "\n".join(tail))
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"building {tag} failed: {exc.explanation or exc}") from exc
    if _image(client, tag) is None:
        raise ImageBuildError(f"the build finished but {tag} does not exist")


@contextlib.contextmanager
def scratch_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="airlock-build-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
