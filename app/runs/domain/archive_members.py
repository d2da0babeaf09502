"""The members of an archive written under a folder (domain/run_archive.py reads the zip or tar): each member's path
checked before a byte of it is written (no absolute path, no `..`, never over another member), every byte counted
against the limits as it is written, an OS error said by the member's name (a full disk a 507)."""
from __future__ import annotations

import errno
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MB = 1024 * 1024
MAX_MEMBERS = 20_000  # a prime-rl run of 2,000 steps on 8 ranks is 18,000 files and folders
IGNORED_TOP = "__MACOSX"


class ArchiveRefused(ValueError):
    """Nothing opened. `member`: the path inside the archive it is about (None: the archive as a whole); `field`:
    where in that member (a JSON path), or which form field; `status`: the HTTP status that says why (400
    unreadable or hostile, 413 too large, 422 a run refused, 507 no room)."""

    def __init__(self, member: str | None, message: str, status: int = 400, field: str | None = None) -> None:
        self.member, self.message, self.status, self.field = member, message, status, field
        where = ": ".join(w for w in (member, field) if w)
        super().__init__(f"{where}: {message}" if where else message)


@dataclass(frozen=True)
class ArchiveLimits:
    max_bytes: int  # unpacked, every member together
    max_members: int = MAX_MEMBERS


_DRIVE = re.compile(r"[A-Za-z]:")


def safe_parts(name: str) -> tuple[str, ...]:
    """The member's path as folder names under the run directory; () for the archive's own root (`./`).
    Backslashes count as separators (Windows zip tools write them), so `..\\x` is refused too."""
    if "\x00" in name:
        raise ArchiveRefused(name, "its path holds a NUL byte")
    if name.startswith(("/", "\\")) or _DRIVE.match(name):
        raise ArchiveRefused(name, "an absolute path: a run's files must sit under the archive's folder")
    parts = tuple(p for p in re.split(r"[/\\]", name) if p not in ("", "."))
    if ".." in parts:
        raise ArchiveRefused(name, "its path goes up out of the archive's folder (..)")
    return parts


class MemberWriter:
    """Members into `into`, counting every byte written against the limits."""

    def __init__(self, into: Path, limits: ArchiveLimits) -> None:
        self.into, self.limits = into, limits
        self.members = self.bytes = 0

    def count(self, name: str) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise ArchiveRefused(name, f"more than {self.limits.max_members:,} members: this server opens archives "
                                       "of at most that many files and folders")

    def folder(self, parts: tuple[str, ...], name: str) -> None:
        if parts:
            _os_call(name, lambda: (self.into.joinpath(*parts)).mkdir(parents=True, exist_ok=True))

    def file(self, parts: tuple[str, ...], name: str, chunks: Iterator[bytes]) -> None:
        if not parts:
            raise ArchiveRefused(name, "a file with no name")
        target = self.into.joinpath(*parts)
        _os_call(name, lambda: target.parent.mkdir(parents=True, exist_ok=True))
        try:
            out = open(target, "xb")  # "x": a member listed twice is refused, never overwritten
        except FileExistsError:
            raise ArchiveRefused(name, "listed twice in the archive (or a file and a folder of one name)") from None
        except OSError as exc:
            raise _os_refusal(name, exc) from None
        with out:
            for chunk in chunks:
                self.bytes += len(chunk)
                if self.bytes > self.limits.max_bytes:
                    raise ArchiveRefused(name, f"the archive unpacks to more than {self.limits.max_bytes // MB:,} MB "
                                               "(counted as it was written, up to this member)", 413)
                try:
                    out.write(chunk)
                except OSError as exc:
                    raise _os_refusal(name, exc) from None


def _os_refusal(name: str, exc: OSError) -> ArchiveRefused:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return ArchiveRefused(name, "the server's disk is full: nothing was opened", 507)
    return ArchiveRefused(name, f"cannot be written here: {exc.strerror or exc}")


def _os_call(name: str, call: Callable[[], Any]) -> Any:
    try:
        return call()
    except OSError as exc:
        raise _os_refusal(name, exc) from None


def ignored(parts: tuple[str, ...]) -> bool:
    return bool(parts) and parts[0] == IGNORED_TOP


__all__ = ["IGNORED_TOP", "MAX_MEMBERS", "MB", "ArchiveLimits", "ArchiveRefused", "MemberWriter", "ignored",
           "safe_parts"]
