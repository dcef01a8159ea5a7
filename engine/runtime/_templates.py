"""Sandbox templates of the operator's own: a language image with more on it, built offline.

A template is a TOML recipe: its name, the language image it stands on, Debian packages (from
the configured mirror), Python packages (from a folder of wheels or an index the recipe names)
and files. ``airlock images build --template RECIPE`` builds it as ``airlock/template-NAME``;
its tag hashes the recipe, every file it copies and the image under it, so a template whose
language image was rebuilt (a new Airlock) is stale until it is built again, and is not used.
Whatever a template adds is made read-only to the sandbox's users and loses setuid bits, as in
every image of ours: a template can add programs and data, never a writable place.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tomllib
from pathlib import Path
from typing import Annotated, get_args

import docker
import docker.errors
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator

from .._errors import ImageError, ImageNotFound
from .._languages import toolchain
from .._models import Language
from .._settings import Settings
from ._dockerapi import connect, image_id
from ._images import ImageStatus, Log, base_id_of, build_recipe_image, image_tag, scratch_dir
from ._labels import MANAGED

__all__ = [
    "BuiltTemplate",
    "TemplateRecipe",
    "build_template",
    "built_templates",
    "read_recipe",
    "template_statuses",
]

TEMPLATE_LABEL = "io.airlock.template"
PARENT_LABEL = "io.airlock.template.parent"
LANGUAGE_LABEL = "io.airlock.template.language"
# The names of our images and of the templates Airlock offers, which no template of the operator's may take.
RESERVED = frozenset({"base", "core", "code-interpreter-v1", *get_args(Language)})
TemplateName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]
DebianPackage = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9+.-]+$")]
# A requirement as pip reads it, without options: no `--index-url` smuggled into the build.
Requirement = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._\-\[\], <>=!~;'\"]*$")]


class TemplateRecipe(BaseModel):
    """What a template adds to its language image (``template.toml``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: TemplateName
    language: Language = Field("python", alias="from")
    packages: tuple[DebianPackage, ...] = ()
    pip: tuple[Requirement, ...] = ()
    wheels: Path | None = Field(None, description="a folder of wheels pip installs from, offline")
    index_url: Annotated[str, StringConstraints(pattern=r"^https?://\S+$")] | None = None
    files: dict[str, Annotated[str, StringConstraints(pattern=r"^/[^\x00]*$")]] = Field(
        default_factory=dict, description="the recipe's files (relative to it) and where each goes in the image"
    )
    folder: Path = Field(Path("."), exclude=True)

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, name: str) -> str:
        if name in RESERVED:
            raise ValueError(f"{name!r} is taken by Airlock's own images; the taken names are {sorted(RESERVED)}")
        return name

    @property
    def tag_repository(self) -> str:
        return f"airlock/template-{self.name}"

    def sources(self) -> list[tuple[Path, str]]:
        """Each file the recipe copies, with where it goes; the wheels' folder's files too."""
        found = []
        for source, destination in sorted(self.files.items()):
            path = (self.folder / source).resolve()
            if not path.is_file():
                raise ImageError(f"template {self.name}: {source!r} is not a file next to its recipe")
            found.append((path, destination))
        if self.wheels is not None:
            folder = (self.folder / self.wheels).resolve()
            if not folder.is_dir():
                raise ImageError(f"template {self.name}: wheels folder {str(self.wheels)!r} does not exist")
            found += [(path, f"/wheels/{path.name}") for path in sorted(folder.iterdir()) if path.is_file()]
        return found


class BuiltTemplate(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    tag: str
    language: Language
    current: bool


def read_recipe(path: Path) -> TemplateRecipe:
    """The recipe at ``path``; an ``ImageError`` naming what is wrong with it otherwise."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ImageError(f"cannot read the template recipe {path}: {exc}") from exc
    try:
        return TemplateRecipe.model_validate({**data, "folder": path.resolve().parent})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ImageError(f"template recipe {path}: {where}: {first['msg']}") from exc


def template_tag(recipe: TemplateRecipe, parent: str) -> str:
    digest = hashlib.sha256(parent.encode())
    digest.update(recipe.model_dump_json(by_alias=True).encode())
    for path, destination in recipe.sources():
        digest.update(destination.encode() + hashlib.sha256(path.read_bytes()).digest())
    return f"{recipe.tag_repository}:{digest.hexdigest()[:12]}"


def dockerfile(recipe: TemplateRecipe) -> str:
    """The template's build: as root, then back to the image's nobody, as every image ends."""
    lines = ["ARG BASE", "FROM ${BASE}", "USER 0:0"]
    packages = [*recipe.packages, *(["python3-pip"] if recipe.pip else [])]
    if packages:
        lines.append(
            "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
            + " ".join(packages)
            + " && apt-get clean && rm -rf /var/lib/apt/lists/*"
        )
    for index, (_, destination) in enumerate(recipe.sources()):
        lines.append(f"COPY [{_quoted_json(f'files/{index}')}, {_quoted_json(destination)}]")
    if recipe.pip:
        where = "--no-index --find-links /wheels" if recipe.index_url is None else f"--index-url {recipe.index_url}"
        if recipe.wheels is not None and recipe.index_url is not None:
            where += " --find-links /wheels"
        requirements = " ".join(_shell_quoted(requirement) for requirement in recipe.pip)
        lines.append(
            "RUN python3 -m pip install --no-cache-dir --break-system-packages --root-user-action=ignore "
            f"{where} {requirements}"
        )
    if recipe.wheels is not None:
        lines.append("RUN rm -rf /wheels")
    # What the template added belongs to root and is read-only to everyone else, with no setuid bit.
    lines.append(
        "RUN find / -xdev -type f -perm /6000 -exec chmod a-s {} + "
        "&& find / -xdev \\( -path /tmp -o -path /dev/shm -o -path /proc -o -path /sys \\) -prune "
        "-o \\( -type f -o -type d \\) -perm /022 ! -perm -1000 -exec chmod go-w {} +"
    )
    lines.append("USER 65534:65534")
    return "\n".join(lines) + "\n"


def _quoted_json(text: str) -> str:
    return json.dumps(text)


def _shell_quoted(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def build_template(settings: Settings, path: Path, *, force: bool = False, log: Log = print) -> BuiltTemplate:
    """Build the template whose recipe is at ``path`` on its language image (built first)."""
    recipe = read_recipe(path)
    client = connect(settings.docker_host)
    try:
        parent = image_tag(toolchain(recipe.language).image, settings, base_id_of(client, settings))
        if image_id(client, parent) is None:
            raise ImageNotFound(
                f"template {recipe.name} stands on {parent}, which is not built: "
                f"run `airlock images build {toolchain(recipe.language).image}` first"
            )
        tag = template_tag(recipe, parent)
        if force or image_id(client, tag) is None:
            with scratch_dir() as context:
                (context / "files").mkdir()
                for index, (source, _) in enumerate(recipe.sources()):
                    shutil.copy(source, context / "files" / str(index))  # its mode too: a program stays runnable
                (context / "Dockerfile").write_text(dockerfile(recipe))
                labels = {TEMPLATE_LABEL: recipe.name, PARENT_LABEL: parent, LANGUAGE_LABEL: recipe.language}
                build_recipe_image(client, context, tag, {"BASE": parent}, labels, log)
            _remove_other_builds(client, recipe, tag, log)
        return BuiltTemplate(name=recipe.name, tag=tag, language=recipe.language, current=True)
    finally:
        client.close()


def built_templates(settings: Settings, client: docker.DockerClient | None = None) -> dict[str, BuiltTemplate]:
    """The templates built here, by name; ``current`` when each stands on today's language image."""
    own = client or connect(settings.docker_host)
    try:
        found: dict[str, BuiltTemplate] = {}
        base_id = base_id_of(own, settings)
        for image in own.images.list(filters={"label": [f"{MANAGED}=true", TEMPLATE_LABEL]}):
            labels = image.labels or {}
            language = labels.get(LANGUAGE_LABEL, "")
            tags = [t for t in image.tags if t.startswith("airlock/template-")]
            if language not in get_args(Language) or not tags:
                continue
            current = labels.get(PARENT_LABEL) == image_tag(toolchain(language).image, settings, base_id)
            name = labels[TEMPLATE_LABEL]
            if name not in found or current:
                found[name] = BuiltTemplate(name=name, tag=tags[0], language=language, current=current)
        return dict(sorted(found.items()))
    finally:
        if client is None:
            own.close()


def template_statuses(settings: Settings) -> list[ImageStatus]:
    """The templates built here as images; one built on an older language image is not present."""
    client = connect(settings.docker_host)
    try:
        statuses = []
        for template in built_templates(settings, client).values():
            size = client.images.get(template.tag).attrs.get("Size", 0)
            remark = f"template on {template.language}" + ("" if template.current else "; stale: build it again")
            statuses.append(
                ImageStatus(
                    name=template.name,
                    tag=template.tag,
                    present=template.current,
                    size_mb=round(size / 1e6, 1),
                    contents=(remark,),
                )
            )
        return statuses
    finally:
        client.close()


def _remove_other_builds(client: docker.DockerClient, recipe: TemplateRecipe, current: str, log: Log) -> None:
    for image in client.images.list(name=recipe.tag_repository):
        for tag in image.tags:
            if tag != current and re.fullmatch(rf"{re.escape(recipe.tag_repository)}:[0-9a-f]{{12}}", tag):
                try:
                    client.images.remove(tag)
                    log(f"removed the older build {tag}")
                except docker.errors.APIError:
                    continue
