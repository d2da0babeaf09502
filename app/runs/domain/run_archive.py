"""A run directory sent as one archive (issue 34's upload): a .zip, .tar or .tar.gz, told apart by its first bytes
(never its name), unpacked into a folder of the server's with every member checked before a byte of it is written.

What is refused, by the member's path inside the archive (`ArchiveRefused.member`), never a path of the server's:
- a path that is absolute (`/x`, `C:x`) or goes up (`..`): a member lands inside the folder or nowhere;
- anything but plain files and folders: symbolic and hard links (a link could point a later member outside the
  folder), devices, FIFOs;
- more than `max_members` members, a member listed twice, a tar header (pax, GNU long name) past 1 MiB (tarfile
  reads one whole into memory);
- more than `max_bytes` unpacked, counted as each member is written (a zip's or tar's own sizes are never
  trusted: a zip bomb lies in its headers), and for a .tar.gz every byte of the tar stream counted as it is
  inflated, skipped data included;
- a zip whose central directory is larger than its members could need (zipfile reads it whole into memory);
- a cut or damaged archive (a zip member whose CRC fails, a tar or gzip stream that ends early), an encrypted zip.
A folder of macOS's Finder (`__MACOSX/`, resource forks) is left out. When every member sits in one top-level
folder, that folder is the run directory (an archive of `out/` holds `out/trainer_state.json`).

Plain stdlib (zipfile, tarfile, gzip): no FastAPI, no torch. Memory is one chunk of `CHUNK` bytes at a time.
"""
from __future__ import annotations

import gzip
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from app.runs.domain.archive_members import (
    MAX_MEMBERS,
    MB,
    ArchiveLimits,
    ArchiveRefused,
    MemberWriter,
    ignored,
    safe_parts,
)

CHUNK = MB
MAX_HEADER_BYTES = MB  # one tar pax or GNU long-name header
CD_BYTES_PER_MEMBER = 512  # a zip's central directory entry: 46 bytes, the name and its extras
TAR_OVERHEAD_PER_MEMBER = 2048  # a tar member's header block, padding and a pax header, beside its data

FORMATS = ("zip", "tar", "tar.gz")


@dataclass(frozen=True)
class Unpacked:
    root: Path  # the run directory: the folder unpacked into, or its one top-level folder
    prefix: str  # the archive's path of `root` ("" or "out/"): a path under root, prefixed, is the member's
    format: str
    members: int
    bytes: int


def archive_format(head: bytes) -> str | None:
    """'zip', 'tar' or 'tar.gz' from the file's first 262 bytes, else None."""
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):  # a member's local header, or an empty zip's end
        return "zip"
    if head.startswith(b"\x1f\x8b"):
        return "tar.gz"  # a gzip stream; what it holds is checked as it is read
    if len(head) >= 262 and head[257:262] == b"ustar":  # POSIX ("ustar\0") and GNU ("ustar  ") tar
        return "tar"
    return None


# -- zip ----------------------------------------------------------------------------------------------------------

def _zip_directory_size(f: BinaryIO) -> int:
    """The central directory's size from the end record (zip64's when it has one), read before zipfile, which
    reads the whole directory into memory. Raises ArchiveRefused when there is no end record (a cut zip)."""
    f.seek(0, 2)
    size = f.tell()
    tail_len = min(size, 22 + 65_535 + 20)  # the end record, its comment, and the zip64 locator before it
    f.seek(size - tail_len)
    tail = f.read(tail_len)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        raise ArchiveRefused(None, "the zip archive is cut short or damaged: it has no end-of-archive record "
                                   "(was the upload complete?)")
    cd_size = struct.unpack("<I", tail[at + 12:at + 16])[0]
    if cd_size == 0xFFFFFFFF and at >= 20 and tail[at - 20:at - 16] == b"PK\x06\x07":
        zip64_end = struct.unpack("<Q", tail[at - 12:at - 4])[0]
        f.seek(zip64_end)
        record = f.read(56)
        if len(record) == 56 and record[:4] == b"PK\x06\x06":
            cd_size = struct.unpack("<Q", record[40:48])[0]
    return cd_size


def _zip_chunks(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
    with zf.open(info) as member:
        while chunk := member.read(CHUNK):
            yield chunk


_ZIP_TYPES = {stat.S_IFLNK: "a symbolic link", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
              stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket"}
_KIND_WORDS = "only plain files and folders are opened"


def _unzip(f: BinaryIO, writer: MemberWriter) -> None:
    cd_size = _zip_directory_size(f)
    if cd_size > writer.limits.max_members * CD_BYTES_PER_MEMBER:
        raise ArchiveRefused(None, f"the zip's central directory is {cd_size:,} bytes: more than "
                                   f"{writer.limits.max_members:,} members could need")
    f.seek(0)
    try:
        zf = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise ArchiveRefused(None, f"the zip archive is damaged: {exc}") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > writer.limits.max_members:  # said before a byte is written, naming the first too many
            writer.members = writer.limits.max_members
            writer.count(infos[writer.limits.max_members].filename)
        for info in infos:
            name = info.filename
            writer.count(name)
            parts = safe_parts(name)
            kind = stat.S_IFMT(info.external_attr >> 16)
            if kind in _ZIP_TYPES:
                raise ArchiveRefused(name, f"{_ZIP_TYPES[kind]}: {_KIND_WORDS}")
            if ignored(parts):
                continue
            if info.is_dir():
                writer.folder(parts, name)
                continue
            if info.flag_bits & 0x1:
                raise ArchiveRefused(name, "encrypted: the server cannot read it")
            try:
                writer.file(parts, name, _zip_chunks(zf, info))
            # zipfile's own refusals: a bad CRC or header, a cut stream, a compression method it lacks (it raises
            # NotImplementedError for those), an encrypted member it cannot open (RuntimeError)
            except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
                raise ArchiveRefused(name, f"damaged or unreadable in the zip: {exc}") from None


# -- tar ----------------------------------------------------------------------------------------------------------

# pax and GNU long-name headers: their data is read whole (tarfile.PAX_TYPES, which typeshed does not list)
_HEADER_TYPES = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
                 tarfile.GNUTYPE_LONGLINK)


class _BoundedTarInfo(tarfile.TarInfo):
    """tarfile reads a pax or GNU long-name header's data whole into memory: past MAX_HEADER_BYTES, refused first."""

    @classmethod
    def fromtarfile(cls, tarfile_: tarfile.TarFile) -> Any:
        buf = tarfile_.fileobj.read(tarfile.BLOCKSIZE)
        obj = cls.frombuf(buf, tarfile_.encoding, tarfile_.errors)
        if obj.type == tarfile.GNUTYPE_SPARSE:  # its map of holes may run on header after header
            raise ArchiveRefused(obj.name, f"a sparse file: {_KIND_WORDS}")
        if obj.type in _HEADER_TYPES and obj.size > MAX_HEADER_BYTES:
            raise ArchiveRefused(obj.name, f"a tar header of {obj.size:,} bytes (pax or GNU long name): more than "
                                           f"{MAX_HEADER_BYTES // MB} MiB")
        obj.offset = tarfile_.fileobj.tell() - tarfile.BLOCKSIZE
        return obj._proc_member(tarfile_)  # type: ignore[attr-defined]


class _Counted:
    """A readable stream that refuses past `limit` bytes read: the inflated tar stream of a .tar.gz, so a gzip
    bomb stops at the limit even in data tarfile skips."""

    def __init__(self, raw: BinaryIO | gzip.GzipFile, limit: int) -> None:
        self.raw, self.limit, self.read_bytes = raw, limit, 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size if size is not None and size >= 0 else CHUNK)
        self.read_bytes += len(data)
        if self.read_bytes > self.limit:
            raise ArchiveRefused(None, f"the archive unpacks to more than {self.limit // MB:,} MB", 413)
        return data


def _tar_chunks(tf: tarfile.TarFile, member: tarfile.TarInfo) -> Iterator[bytes]:
    source = tf.extractfile(member)
    assert source is not None  # a regular file
    while chunk := source.read(CHUNK):
        yield chunk


def _tar_kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return f"a symbolic link (to {member.linkname!r})"
    if member.islnk():
        return f"a hard link (to {member.linkname!r})"
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a FIFO"
    return f"a tar member of type {member.type!r}"


def _untar(f: BinaryIO, writer: MemberWriter, compressed: bool) -> None:
    stream: Any = f
    if compressed:
        slack = writer.limits.max_members * TAR_OVERHEAD_PER_MEMBER + MB
        stream = _Counted(gzip.GzipFile(fileobj=f, mode="rb"), writer.limits.max_bytes + slack)
    try:
        # "r|": a stream, read once front to back, one member at a time
        with tarfile.open(fileobj=stream, mode="r|", tarinfo=_BoundedTarInfo) as tf:
            while (member := tf.next()) is not None:
                name = member.name
                writer.count(name)
                parts = safe_parts(name)
                if not (member.isreg() or member.isdir()):
                    raise ArchiveRefused(name, f"{_tar_kind(member)}: {_KIND_WORDS}")
                if ignored(parts):
                    continue
                if member.isdir():
                    writer.folder(parts, name)
                else:
                    writer.file(parts, name, _tar_chunks(tf, member))
                # tarfile keeps every header it has read: here one at a time is enough
                tf.members.clear()  # type: ignore[attr-defined]
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        what = "tar.gz" if compressed else "tar"
        raise ArchiveRefused(None, f"the {what} archive is cut short or damaged: {exc}") from None


# -- both ---------------------------------------------------------------------------------------------------------

def unpack(archive: Path, into: Path, limits: ArchiveLimits) -> Unpacked:
    """Unpack `archive` into the folder `into` (created; the caller removes it, refused or not)."""
    into.mkdir(parents=True, exist_ok=True)
    writer = MemberWriter(into, limits)
    with open(archive, "rb") as f:
        head = f.read(512)
        fmt = archive_format(head)
        if fmt is None:
            raise ArchiveRefused(None, "not a .zip, .tar or .tar.gz archive (told by its first bytes, not its name)"
                                 if head else "the archive is empty")
        f.seek(0)
        if fmt == "zip":
            _unzip(f, writer)
        else:
            _untar(f, writer, compressed=fmt == "tar.gz")
    if writer.members == 0:
        raise ArchiveRefused(None, "the archive holds no file")
    root, prefix = into, ""
    entries = [p for p in into.iterdir()]
    if len(entries) == 1 and entries[0].is_dir():
        root, prefix = entries[0], f"{entries[0].name}/"
    return Unpacked(root, prefix, fmt, writer.members, writer.bytes)


__all__ = ["ArchiveLimits", "ArchiveRefused", "FORMATS", "MAX_MEMBERS", "Unpacked", "archive_format", "safe_parts",
           "unpack"]
