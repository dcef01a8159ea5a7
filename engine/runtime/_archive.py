"""Carrying built images to machines that cannot build them: one file, verified before use.

The file is Docker's own image archive (``docker save`` of every image asked for, with the base
and core they stand on), to which ``airlock-images.json`` is appended: the images' tags and
content ids, and the SHA-256 of every other member. Loading reads the whole file and checks it
against that list before the daemon sees a byte, then checks that every tag names the content
it named where it was saved. ``docker load`` also reads the file as it is. The OCI runtime keeps
no store of its own to carry: it unpacks each image from Docker on first use.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import tarfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

import docker
import docker.errors
from pydantic import BaseModel, ConfigDict, ValidationError

from .._errors import ImageError, ImageNotFound
from .._settings import Settings
from .._version import __version__
from ._dockerapi import connect, image_id
from ._images import CORE, ImageStatus, image_status
from ._templates import template_statuses

__all__ = ["ArchivedImage", "ImageArchive", "load_images", "save_images"]

MANIFEST = "airlock-images.json"
FORMAT = "airlock-images/1"
CHUNK = 1 << 20
Log = Callable[[str], None]


class ArchivedImage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    tag: str
    id: str


class ImageArchive(BaseModel):
    """What ``airlock-images.json`` says of the file it ends."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: str
    airlock: str
    created: str
    images: tuple[ArchivedImage, ...]
    members: dict[str, str]


def save_images(settings: Settings, destination: Path, names: Iterable[str] = (), *, log: Log = print) -> ImageArchive:
    """Write the built images and templates called ``names`` (every built one when empty), with
    the base and core they stand on, to ``destination`` as one verified file."""
    statuses = [*image_status(settings), *template_statuses(settings)]
    chosen = _chosen(statuses, set(names))
    client = connect(settings.docker_host)
    try:
        archived = tuple(ArchivedImage(name=s.name, tag=s.tag, id=image_id(client, s.tag) or "") for s in chosen)
        log(f"saving {', '.join(image.name for image in archived)}")
        partial = destination.with_name(f".{destination.name}.partial")
        members: dict[str, str] = {}
        try:
            with partial.open("wb") as out, tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as written:
                saved = _saved_stream(client, [image.tag for image in archived])
                with tarfile.open(fileobj=saved, mode="r|") as docker_archive:
                    for member in docker_archive:
                        data = docker_archive.extractfile(member) if member.isfile() else None
                        if data is None:
                            written.addfile(member)
                            fingerprint = _fingerprint(member, None)
                        else:
                            hashing = _Hashing(data)
                            written.addfile(member, hashing)
                            fingerprint = hashing.digest.hexdigest()
                        if fingerprint is not None:
                            members[member.name] = fingerprint
                manifest = ImageArchive(
                    format=FORMAT,
                    airlock=__version__,
                    created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                    images=archived,
                    members=members,
                )
                body = manifest.model_dump_json(indent=1).encode()
                info = tarfile.TarInfo(MANIFEST)
                info.size, info.mode = len(body), 0o644
                written.addfile(info, io.BytesIO(body))
            partial.replace(destination)
        finally:
            partial.unlink(missing_ok=True)
        return manifest
    finally:
        client.close()


def load_images(settings: Settings, source: Path, *, log: Log = print) -> ImageArchive:
    """Check ``source`` whole, load it into the daemon, and check that each of its tags now names
    the content it was saved with."""
    manifest = verify_archive(source)
    log(f"{source} holds {', '.join(image.name for image in manifest.images)}; every member checks out")
    client = connect(settings.docker_host)
    try:
        with source.open("rb") as data:
            try:
                for line in client.api.load_image(data, quiet=True):  # type: ignore[no-untyped-call]
                    if "error" in line:
                        raise ImageError(f"the Docker engine refused {source}: {line['error']}")
            except docker.errors.APIError as exc:
                raise ImageError(f"the Docker engine refused {source}: {exc.explanation or exc}") from exc
        wrong = [image.tag for image in manifest.images if image_id(client, image.tag) != image.id]
        if wrong:
            raise ImageError(f"after loading {source}, these tags name other content than was saved: {wrong}")
        return manifest
    finally:
        client.close()


def verify_archive(source: Path) -> ImageArchive:
    """The archive's manifest, once every member of ``source`` matches it (and nothing else is there)."""
    hashes: dict[str, str] = {}
    manifest_body: bytes | None = None
    try:
        with tarfile.open(source, mode="r|") as archive:
            for member in archive:
                data = archive.extractfile(member) if member.isfile() else None
                if member.name == MANIFEST and data is not None:
                    manifest_body = data.read(1 << 24)
                elif (fingerprint := _fingerprint(member, data)) is not None:
                    hashes[member.name] = fingerprint
    except (OSError, tarfile.TarError) as exc:
        raise ImageError(f"{source} is not a whole image archive: {exc}") from exc
    if manifest_body is None:
        raise ImageError(f"{source} has no {MANIFEST}: it was not written by `airlock images save`")
    try:
        manifest = ImageArchive.model_validate_json(manifest_body)
    except ValidationError as exc:
        raise ImageError(f"{source}'s {MANIFEST} is malformed: {exc.errors()[0]['msg']}") from exc
    if manifest.format != FORMAT:
        raise ImageError(f"{source} is in format {manifest.format!r}; this Airlock reads {FORMAT!r}")
    if hashes != manifest.members:
        differ = sorted(
            set(hashes) ^ set(manifest.members) | {n for n in hashes if manifest.members.get(n) != hashes[n]}
        )
        raise ImageError(f"{source} does not match its {MANIFEST} (damaged or changed): {differ[:5]}")
    return manifest


def _chosen(statuses: list[ImageStatus], names: set[str]) -> list[ImageStatus]:
    known = {status.name: status for status in statuses}
    unknown = sorted(names - set(known))
    if unknown:
        raise ImageNotFound(f"no image is called {', '.join(unknown)}; the images are {', '.join(known)}")
    missing = sorted(name for name in names if not known[name].present)
    if missing:
        raise ImageNotFound(f"not built here: {', '.join(missing)} (build with `airlock images build`)")
    wanted = {"base", CORE, *names} if names else set(known)
    chosen = [status for status in statuses if status.name in wanted and status.present]
    if not any(status.name not in ("base", CORE) for status in chosen):
        raise ImageNotFound("no language image is built here: nothing to save (build with `airlock images build`)")
    return chosen


def _saved_stream(client: docker.DockerClient, tags: list[str]) -> IO[bytes]:
    """The daemon's ``docker save`` of ``tags``, as it comes (several tags at once share their
    layers; the SDK's own call takes one)."""
    api = client.api
    response = api.get(f"{api.base_url}/v{api.api_version}/images/get", params={"names": tags}, stream=True)
    if response.status_code != 200:
        raise ImageError(f"the Docker engine could not save {tags}: {response.text[:500]}")
    stream: IO[bytes] = response.raw  # type: ignore[assignment]  # urllib3's response reads like a file
    return stream


def _fingerprint(member: tarfile.TarInfo, data: IO[bytes] | None) -> str | None:
    """What a member is checked by: its content's SHA-256, or where a link points; None for a
    folder (a folder holds nothing of its own)."""
    if member.issym() or member.islnk():
        return f"link:{member.linkname}"
    if data is None:
        return None
    digest = hashlib.sha256()
    while chunk := data.read(CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


class _Hashing:
    """A member's data on its way into the new archive, hashed as it passes."""

    def __init__(self, data: IO[bytes]) -> None:
        self._data, self.digest = data, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        chunk = self._data.read(size)
        self.digest.update(chunk)
        return chunk
