"""A run upload's request body, streamed once into a file: the archive as the raw body (the upload page's script,
API clients: `curl --data-binary @run.tar.gz`) or as the `archive` part of a multipart form (the page's form when
no script runs: a browser sends a file no other way).

Never whole in memory: each chunk the server receives (about 64 KiB) goes to the file through the thread pool,
a MiB at a time. Starlette's own form parser is not used: it spools a file to the system's temporary folder
(a RAM disk on many machines), not to DATA_DIR. The body's cap is the transport's (middleware/limits.py,
RUN_UPLOAD_MAX_MB plus the form's overhead), past which `receive` raises and the middleware answers 413.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from python_multipart.multipart import MultipartParseError, MultipartParser, parse_options_header
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app.runs.domain.run_archive import MB, ArchiveRefused

FLUSH_BYTES = MB
FIELD = "archive"  # the form's file input, and the part read from a multipart body


@dataclass
class Received:
    """What is known of the archive as it arrives: the name its form part gave it (None for a raw body), its size."""
    filename: str | None = None
    size: int = 0


class _Sink:
    """Bytes into the file, written in the thread pool once a MiB has gathered."""

    def __init__(self, out: BinaryIO) -> None:
        self.out, self.pending, self.size = out, bytearray(), 0

    async def write(self, data: bytes) -> None:
        self.pending += data
        self.size += len(data)
        if len(self.pending) >= FLUSH_BYTES:
            await self.flush()

    async def flush(self) -> None:
        if self.pending:
            chunk, self.pending = bytes(self.pending), bytearray()
            await run_in_threadpool(self.out.write, chunk)


class _Form:
    """python-multipart's callbacks: keep the `archive` part's bytes of the chunk just parsed, drop the rest."""

    def __init__(self, received: Received) -> None:
        self.received = received
        self.found = self.in_archive = False
        self.field, self.value, self.headers = b"", b"", {}  # type: tuple[bytes, bytes, dict[bytes, bytes]]
        self.data: list[bytes] = []

    def callbacks(self) -> dict:
        return {"on_part_begin": self.part_begin, "on_header_field": self.header_field,
                "on_header_value": self.header_value, "on_header_end": self.header_end,
                "on_headers_finished": self.headers_finished, "on_part_data": self.part_data,
                "on_part_end": self.part_end}

    def part_begin(self) -> None:
        self.headers, self.in_archive = {}, False

    def header_field(self, data: bytes, start: int, end: int) -> None:
        self.field += data[start:end]

    def header_value(self, data: bytes, start: int, end: int) -> None:
        self.value += data[start:end]

    def header_end(self) -> None:
        self.headers[self.field.lower()] = self.value
        self.field, self.value = b"", b""

    def headers_finished(self) -> None:
        _, options = parse_options_header(self.headers.get(b"content-disposition"))
        self.in_archive = options.get(b"name") == FIELD.encode() and not self.found
        self.found = self.found or self.in_archive
        if self.in_archive and options.get(b"filename"):
            self.received.filename = options[b"filename"].decode("utf-8", "replace")

    def part_data(self, data: bytes, start: int, end: int) -> None:
        if self.in_archive:
            self.data.append(data[start:end])

    def part_end(self) -> None:
        self.in_archive = False


async def _multipart(request: Request, content_type: str, sink: _Sink, received: Received) -> None:
    _, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if not boundary:
        raise ArchiveRefused(None, "a multipart body with no boundary in its Content-Type")
    form = _Form(received)
    parser = MultipartParser(boundary, form.callbacks())  # type: ignore[arg-type]
    try:
        async for chunk in request.stream():
            parser.write(chunk)
            for data in form.data:
                await sink.write(data)
            form.data.clear()
        parser.finalize()
    except MultipartParseError as exc:
        raise ArchiveRefused(None, f"the multipart body is malformed: {exc}") from None
    if not form.found:
        raise ArchiveRefused(None, f"no `{FIELD}` part in the form: the archive goes in a file field named "
                                   f"{FIELD!r}", 422, field=FIELD)


async def receive_archive(request: Request, path: Path, received: Received | None = None) -> int:
    """Stream the request's archive into `path` (created); its size. Raises ArchiveRefused (400/422) for a body
    that holds none, ClientDisconnect when the client goes away, and the body cap's exception past it. `received`
    learns the form part's file name as soon as its headers are read (a refusal names the file)."""
    received = received if received is not None else Received()
    content_type = request.headers.get("content-type", "")
    with open(path, "xb") as out:
        sink = _Sink(out)
        if content_type.lower().startswith("multipart/form-data"):
            await _multipart(request, content_type, sink, received)
        else:
            async for chunk in request.stream():
                await sink.write(chunk)
        await sink.flush()
    received.size = sink.size
    if sink.size == 0:
        raise ArchiveRefused(None, "the request holds no archive (an empty body)", 422, field=FIELD)
    return sink.size


__all__ = ["FIELD", "Received", "receive_archive"]
