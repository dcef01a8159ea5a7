"""E2B's shapes, once, for both ways Airlock speaks E2B: the dialect ``airlock serve`` speaks to
the unmodified SDKs (``engine.serve``) and the in-process drop-in that is the SDK's own API
(``engine.compat.e2b_code_interpreter``). Each translates the core's values with these, so the
two cannot drift apart; ``tests/e2b_kit.py`` runs the same checks against both."""

from __future__ import annotations

from typing import Any, Literal

from ..sandboxes._interpreter import CellResult
from ..sandboxes._sandbox import EntryType
from ..sandboxes._watch import FileEventType

__all__ = ["ENTRY_KINDS", "RESULT_FIELDS", "WIRE_ENTRY_TYPES", "WIRE_EVENT_TYPES", "result_fields"]

# MIME type to the field of the SDK's Result, in the SDK's order.
RESULT_FIELDS = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
    "e2b/data": "data",
    "e2b/chart": "chart",
}
# An entry's type as the SDK names it (``FileType``), and as envd sends it on the wire.
ENTRY_KINDS: dict[EntryType, Literal["file", "dir"]] = {EntryType.FILE: "file", EntryType.DIRECTORY: "dir"}
WIRE_ENTRY_TYPES = {EntryType.FILE: "FILE_TYPE_FILE", EntryType.DIRECTORY: "FILE_TYPE_DIRECTORY"}
# A watcher's event types as envd sends them (the SDK's FilesystemEventType values are ours).
WIRE_EVENT_TYPES = {kind: f"EVENT_TYPE_{kind.name}" for kind in FileEventType}


def result_fields(cell: CellResult) -> tuple[dict[str, Any], dict[str, Any]]:
    """A cell's MIME bundle as the SDK's Result fields, and the MIME types it has no field for.
    A string value's text is shown unquoted, as the SDK shows it."""
    fields = {RESULT_FIELDS[mime]: value for mime, value in cell.data.items() if mime in RESULT_FIELDS}
    text = fields.get("text")
    if isinstance(text, str) and len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        fields["text"] = text[1:-1]
    return fields, {mime: value for mime, value in cell.data.items() if mime not in RESULT_FIELDS}
