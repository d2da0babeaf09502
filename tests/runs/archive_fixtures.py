"""Archives for the run upload tests (issue 34): the shipped example run directory as .zip, .tar and .tar.gz, and
hostile ones built member by member with the stdlib (traversal, absolute paths, links, bombs, cut archives)."""
from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from pathlib import Path

from app.runs.examples import RUN_DIR

TOP = "trl-run"  # the one top-level folder the archives put the example in


def example_files(top: str = TOP) -> list[tuple[str, bytes]]:
    return [(f"{top}/{p.relative_to(RUN_DIR).as_posix()}", p.read_bytes())
            for p in sorted(RUN_DIR.rglob("*")) if p.is_file()]


def zip_of(files: list[tuple[str, bytes]], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in files:
            zf.writestr(name, data)
    return buf.getvalue()


def tar_of(files: list[tuple[str, bytes]], mode: str = "w", extra: list[tarfile.TarInfo] | None = None,
           fmt: int = tarfile.PAX_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode, format=fmt) as tf:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        for info in extra or []:
            tf.addfile(info)
    return buf.getvalue()


def example_archive(fmt: str, extra: list[tuple[str, bytes]] | None = None) -> bytes:
    files = example_files() + (extra or [])
    if fmt == "zip":
        return zip_of(files)
    return tar_of(files, "w:gz" if fmt == "tar.gz" else "w")


def tar_link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def tar_device(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
    return info


def zip_symlink(name: str, target: str) -> bytes:
    """A zip whose member is a symbolic link the way Info-ZIP stores one: unix mode S_IFLNK, the target as data."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{TOP}/trainer_state.json", (RUN_DIR / "trainer_state.json").read_bytes())
        info = zipfile.ZipInfo(name)
        info.create_system = 3
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, target)
    return buf.getvalue()


def zeros_zip(name: str, size: int) -> bytes:
    """A deflate bomb: `size` zero bytes in about size/1000 bytes of archive."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf, zf.open(name, "w", force_zip64=True) as out:
        block = bytes(1024 * 1024)
        for _ in range(size // len(block)):
            out.write(block)
    return buf.getvalue()


def zeros_tar_gz(name: str, size: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo(name)
        info.size = size
        tf.addfile(info, _Zeros(size))
    return buf.getvalue()


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readinto(self, b) -> int:  # type: ignore[override]
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n

    def readable(self) -> bool:
        return True


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*")] if folder.exists() else []
