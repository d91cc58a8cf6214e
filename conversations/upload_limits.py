"""How big an upload may be, and the files of a request read within those limits.

Shared by the upload page and ``POST /api/v1/conversations/import``. An upload larger than the
per-upload limit is refused from its Content-Length before a byte is read; a file larger than the
per-file limit is refused as soon as the multipart reader passes the limit (``TooLarge``: a 413).
Files go to temporary files on disk past a few MB (Django's upload handlers), never into memory
whole, and the importers stream them.
"""

from __future__ import annotations

import tempfile
from typing import Any, BinaryIO

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpRequest

from conversations.uploads import Upload

MB = 1024 * 1024


class TooLarge(Exception):
    """The upload, or one of its files, is over its limit."""


def max_file_bytes() -> int:
    return int(getattr(settings, "TURNSCOPE_IMPORT_MAX_FILE_BYTES", 256 * MB))


def max_upload_bytes() -> int:
    return int(getattr(settings, "TURNSCOPE_IMPORT_MAX_BYTES", 512 * MB))


def max_files() -> int:
    return int(getattr(settings, "DATA_UPLOAD_MAX_NUMBER_FILES", 100) or 100)


def human(size: int) -> str:
    return f"{size // MB} MB" if size >= MB and size % MB == 0 else f"{size:,} bytes"


def limits() -> dict[str, Any]:
    """The limits as the page states them (and its script checks before sending)."""
    return {"file": max_file_bytes(), "upload": max_upload_bytes(), "files": max_files(),
            "file_text": human(max_file_bytes()), "upload_text": human(max_upload_bytes())}


def check_length(meta: Any) -> None:
    """Refuse an upload whose declared length is over the per-upload limit."""
    try:
        declared = int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > max_upload_bytes():
        raise TooLarge(f"the upload is {declared:,} bytes; the limit is "
                       f"{human(max_upload_bytes())} per upload")


class _LimitHandler(FileUploadHandler):
    """First of the request's upload handlers: passes data on, counting each file's bytes."""

    def handle_raw_input(self, input_data: Any, META: Any, content_length: int, boundary: Any,
                         encoding: str | None = None) -> None:
        check_length({"CONTENT_LENGTH": content_length})

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        if start + len(raw_data) > max_file_bytes():
            raise TooLarge(f"{self.file_name} is larger than the limit of "
                           f"{human(max_file_bytes())} per file")
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler keeps the file


def install(request: HttpRequest) -> None:
    """Put the limits in front of the request's upload handlers (before its body is read)."""
    request.upload_handlers.insert(0, _LimitHandler(request))


def request_files(files: Any) -> list[Upload]:
    """The uploaded files of a request (every file field, in order) as importer inputs."""
    out = []
    for field in files:
        for uploaded in files.getlist(field):
            out.append(Upload(uploaded.name or field, _reopen(uploaded), uploaded.size))
    return out


def _reopen(uploaded: Any) -> Any:
    def opened() -> BinaryIO:
        uploaded.seek(0)
        return uploaded

    return opened


def spooled_body(stream: Any, meta: Any, name: str) -> Upload:
    """A raw request body as one file: copied to a temporary file (in memory while small),
    refused past the per-file limit."""
    try:
        declared = int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    limit = max_file_bytes()
    if declared > limit:
        raise TooLarge(f"the body is {declared:,} bytes; the limit is {human(limit)} per file")
    # Closed by the importer that reads it (or below, when refused).
    spool = tempfile.SpooledTemporaryFile(max_size=8 * MB)  # noqa: SIM115
    size = 0
    while stream is not None:
        block = stream.read(MB)
        if not block:
            break
        size += len(block)
        if size > limit:
            spool.close()
            raise TooLarge(f"the body is larger than the limit of {human(limit)} per file")
        spool.write(block)
    spool.seek(0)

    def opened() -> BinaryIO:
        spool.seek(0)
        return spool  # type: ignore[return-value]

    return Upload(name, opened, size)
