"""Unpacking a run directory sent as one archive (domain/run_archive.py, issue 34): the format from the first bytes,
each hostile member refused by its path inside the archive before it is written, a bomb stopped by the bytes
actually written, one top-level folder unwrapped."""
from __future__ import annotations

import gzip
import hashlib
import tarfile

import pytest
from archive_fixtures import (
    TOP,
    example_archive,
    example_files,
    tar_device,
    tar_link,
    tar_of,
    zeros_tar_gz,
    zeros_zip,
    zip_of,
    zip_symlink,
)

from app.runs.domain.run_archive import (
    MB,
    ArchiveLimits,
    ArchiveRefused,
    archive_format,
    safe_parts,
    unpack,
)

LIMITS = ArchiveLimits(16 * MB)


def unpacked(tmp_path, raw: bytes, limits: ArchiveLimits = LIMITS):
    archive = tmp_path / "archive"
    archive.write_bytes(raw)
    return unpack(archive, tmp_path / "files", limits)


def refused(tmp_path, raw: bytes, limits: ArchiveLimits = LIMITS) -> ArchiveRefused:
    with pytest.raises(ArchiveRefused) as info:
        unpacked(tmp_path, raw, limits)
    return info.value


@pytest.mark.parametrize("fmt", ["zip", "tar", "tar.gz"])
def test_the_example_unpacks_byte_for_byte_with_its_folder_unwrapped(tmp_path, fmt):
    raw = example_archive(fmt)
    assert archive_format(raw[:512]) == fmt
    got = unpacked(tmp_path, raw)
    assert got.format == fmt and got.root == tmp_path / "files" / TOP and got.prefix == f"{TOP}/"
    want = {name.removeprefix(f"{TOP}/"): hashlib.sha256(data).hexdigest() for name, data in example_files()}
    have = {p.relative_to(got.root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in got.root.rglob("*") if p.is_file()}
    assert have == want and got.bytes == sum(len(d) for _, d in example_files())


def test_two_top_level_entries_are_not_unwrapped(tmp_path):
    got = unpacked(tmp_path, zip_of([("a/trainer_state.json", b"{}"), ("b.txt", b"x")]))
    assert got.root == tmp_path / "files" and got.prefix == ""


def test_macos_resource_forks_are_left_out(tmp_path):
    got = unpacked(tmp_path, zip_of([("run/trainer_state.json", b"{}"), ("__MACOSX/run/._trainer_state.json", b"x")]))
    assert got.root.name == "run" and not (tmp_path / "files" / "__MACOSX").exists()


@pytest.mark.parametrize("name, words", [
    ("../evil.json", "goes up"), ("run/../../evil.json", "goes up"), ("run\\..\\..\\evil.json", "goes up"),
    ("/etc/evil.json", "absolute"), ("C:/evil.json", "absolute"), ("\\\\server\\evil", "absolute"),
])
def test_paths_out_of_the_folder(name, words):
    with pytest.raises(ArchiveRefused) as info:
        safe_parts(name)
    assert info.value.member == name and words in info.value.message


@pytest.mark.parametrize("build", ["zip", "tar"])
@pytest.mark.parametrize("name", ["../evil.json", "/tmp/evil.json", "run/../../evil.json"])
def test_traversal_and_absolute_members_are_refused_before_anything_is_written(tmp_path, build, name):
    files = [("run/trainer_state.json", b"{}"), (name, b"pwned")]
    exc = refused(tmp_path, zip_of(files) if build == "zip" else tar_of(files))
    assert exc.member == name and exc.status == 400
    assert not list(tmp_path.parent.rglob("evil.json")) and not (tmp_path.parent / "tmp" / "evil.json").exists()


@pytest.mark.parametrize("member, words", [
    (tar_link("run/link", "/etc/passwd"), "symbolic link"),
    (tar_link("run/hard", "run/trainer_state.json", tarfile.LNKTYPE), "hard link"),
    (tar_device("run/null"), "device"),
])
def test_links_and_devices_in_a_tar_are_refused(tmp_path, member, words):
    exc = refused(tmp_path, tar_of([("run/trainer_state.json", b"{}")], extra=[member]))
    assert exc.member == member.name and words in exc.message


def test_a_symlink_in_a_zip_is_refused(tmp_path):
    exc = refused(tmp_path, zip_symlink(f"{TOP}/step-records", "/etc"))
    assert exc.member == f"{TOP}/step-records" and "symbolic link" in exc.message
    assert not (tmp_path / "files" / TOP / "step-records").exists()


@pytest.mark.parametrize("build", [zip_of, tar_of])
def test_too_many_members(tmp_path, build):
    files = [(f"run/f{i}.txt", b"x") for i in range(6)]
    exc = refused(tmp_path, build(files), ArchiveLimits(MB, max_members=5))
    assert exc.member == "run/f5.txt" and "more than 5 members" in exc.message


def test_a_member_listed_twice(tmp_path):
    exc = refused(tmp_path, tar_of([("run/a.json", b"1"), ("run/a.json", b"2")]))
    assert exc.member == "run/a.json" and "twice" in exc.message


@pytest.mark.parametrize("build", [zeros_zip, zeros_tar_gz])
def test_a_bomb_stops_at_the_limit_counted_as_written(tmp_path, build):
    limit = 4 * MB
    raw = build("run/zeros.bin", 64 * MB)
    assert len(raw) < MB  # 64 MB of zeros in well under 1 MB sent
    exc = refused(tmp_path, raw, ArchiveLimits(limit))
    assert exc.status == 413 and "more than 4 MB" in exc.message
    written = sum(p.stat().st_size for p in (tmp_path / "files").rglob("*") if p.is_file())
    assert written <= limit  # refused before the chunk that would pass it was written


def test_a_tar_gz_of_data_it_skips_is_still_counted(tmp_path):
    """Inflated bytes are counted whatever is done with them: 64 MB under __MACOSX/, which is never written."""
    exc = refused(tmp_path, zeros_tar_gz("__MACOSX/zeros.bin", 64 * MB), ArchiveLimits(2 * MB))
    assert exc.status == 413 and exc.member is None
    assert not list((tmp_path / "files").rglob("*"))


def test_a_huge_pax_header_is_refused_before_it_is_read(tmp_path):
    raw = tar_of([("run/" + "x" * (2 * MB), b"{}")], fmt=tarfile.PAX_FORMAT)
    exc = refused(tmp_path, raw)
    assert "tar header" in exc.message and exc.status == 400


@pytest.mark.parametrize("raw, words", [
    (b"", "empty"), (b"hello, world", "not a .zip, .tar or .tar.gz"), (b"{\"log_history\": []}", "not a .zip"),
    (b"\x89PNG\r\n\x1a\n" + bytes(600), "not a .zip"),
])
def test_not_an_archive(tmp_path, raw, words):
    exc = refused(tmp_path, raw)
    assert exc.member is None and words in exc.message and exc.status == 400


@pytest.mark.parametrize("fmt", ["zip", "tar", "tar.gz"])
def test_a_cut_archive_is_refused(tmp_path, fmt):
    raw = example_archive(fmt)
    exc = refused(tmp_path, raw[: len(raw) // 2])
    assert exc.status == 400 and ("cut short" in exc.message or "damaged" in exc.message)


def test_a_gzip_that_holds_no_tar(tmp_path):
    exc = refused(tmp_path, gzip.compress(b"just text, no tar inside" * 40))
    assert exc.status == 400 and "tar.gz" in exc.message


def test_a_zip_member_with_a_bad_crc(tmp_path):
    raw = bytearray(zip_of([("run/trainer_state.json", b"A" * 4000)], compression=0))
    at = raw.index(b"A" * 100)
    raw[at] = ord("B")  # stored, not compressed: the bytes read differ from the CRC recorded
    exc = refused(tmp_path, bytes(raw))
    assert exc.member == "run/trainer_state.json" and "damaged" in exc.message
