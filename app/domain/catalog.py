"""Every walkthrough export in one directory, loaded once at start-up.

A bad file becomes an entry carrying its error instead of stopping the others,
so the app can list it honestly ("could not load: <field>: <why>").
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.domain.snapshot import Snapshot, SnapshotError, parse_snapshot
from app.domain.snapshot.fields import UNLINKABLE_IDS

log = logging.getLogger(__name__)

# Which walkthrough kind runs a snapshot (a kind's id), or None for view-only. The kind registry
# supplies it (app/house.py); the domain only stores the answer.
Classify = Callable[[Snapshot], str | None]


def view_only(_snapshot: Snapshot) -> str | None:
    return None


@dataclass(frozen=True)
class Reader:
    """A file format other than a snapshot that a kind opens (its own JSON format): asked, in order,
    before a file is read as a `tensorviz.graph` snapshot. `opens` looks at the parsed JSON only;
    `open` builds the graph the pages draw and the kind's own data (the entry's `payload`), or
    raises SnapshotError naming the field by path, as a snapshot's refusal does."""
    kind: str
    title: str  # what the file is, for a refusal: "a <title> may be at most …"
    max_bytes: int  # its own limit; the transport's cap is the largest reader's (or a snapshot's)
    opens: Callable[[Any], bool]
    open: Callable[[Any, str], tuple[Snapshot, Any]]


def reader_for(readers: Sequence[Reader], data: Any) -> Reader | None:
    return next((r for r in readers if r.opens(data)), None)

@dataclass(frozen=True)
class Featured:
    """One of a kind's own walkthroughs, shown first and with its own words on the start page and
    in every list: what it teaches, and the sentences that introduce it when it opens the story.
    The first featured one that loads is the default walkthrough (`/`)."""
    walkthrough_id: str
    headline: str
    teaches: str
    intro: str = ""
    rank: int = 0  # place in the lists, lowest first
    # per step id, the sentence the step teaches (its page's headline): the start page starts with it
    points: tuple[tuple[str, str], ...] = ()


def walkthrough_id_from_filename(name: str) -> str:
    """``ours.tensorviz.json`` -> ``ours``; ``other.json`` -> ``other``."""
    stem = name.removesuffix(".json")
    return stem.removesuffix(".tensorviz")


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    source: str  # file name, as shown in error messages
    snapshot: Snapshot | None
    error: str | None
    kind: str | None = None  # decided once, when the file is loaded or uploaded; None = view-only
    payload: Any = None  # what a Reader read beside the graph (a kind's own data); None for a snapshot

    @property
    def ok(self) -> bool:
        return self.snapshot is not None and self.error is None


class Catalog:
    def __init__(self, entries: list[CatalogEntry] | tuple[CatalogEntry, ...] = ()) -> None:
        # Uploaded snapshots (domain.uploads.UploadStore), consulted after the folder's own.
        self.uploads = None
        # The kinds' own walkthroughs (Featured), set by the web layer from its kind registry.
        self.featured: tuple[Featured, ...] = ()
        self._entries = list(entries)
        self._by_id: dict[str, CatalogEntry] = {}
        for entry in self._entries:
            self._by_id.setdefault(entry.id, entry)  # the first of a duplicate id wins

    @classmethod
    def load_directory(cls, path: pathlib.Path | str, classify: Classify = view_only,
                       readers: Sequence[Reader] = (), extra: Sequence[pathlib.Path] = ()) -> Catalog:
        """Every *.json file of the folder, then the `extra` files (the kinds' own, made elsewhere)."""
        directory = pathlib.Path(path)
        files: list[pathlib.Path] = []
        if not directory.is_dir():
            # A missing walkthroughs folder should give an empty app, not a crash.
            log.warning("walkthrough directory %s does not exist; catalog is empty", directory)
        else:
            try:
                files = sorted(directory.glob("*.json"))
            except OSError as exc:  # e.g. a folder that may not be listed
                log.warning("cannot list walkthrough directory %s (%s); catalog is empty", directory, exc)
        files += [pathlib.Path(f) for f in extra]
        entries: list[CatalogEntry] = []
        seen: dict[str, str] = {}
        # Every *.json entry is listed: a dangling link or a folder is an error to show,
        # not a file that silently is not there.
        for file in files:
            entry = _load_one(file, classify, readers)
            if entry.id in seen:
                entry = CatalogEntry(entry.id, entry.source, None,
                                     f"{file.name}: $: duplicate walkthrough id {entry.id!r} "
                                     f"(already loaded from {seen[entry.id]})")
                log.warning("skipping walkthrough: %s", entry.error)
            seen.setdefault(entry.id, file.name)
            entries.append(entry)
        return cls(entries)

    def entries(self) -> list[CatalogEntry]:
        return list(self._entries)

    def get(self, walkthrough_id: str) -> CatalogEntry:
        entry = self._by_id.get(walkthrough_id)
        if entry is None and self.uploads is not None:
            entry = self.uploads.get(walkthrough_id)
        if entry is None:
            raise KeyError(walkthrough_id)
        return entry

    def snapshot(self, walkthrough_id: str) -> Snapshot:
        """The loaded snapshot; KeyError if the id is unknown or failed to load."""
        entry = self.get(walkthrough_id)
        if entry.snapshot is None:
            raise KeyError(walkthrough_id)
        return entry.snapshot

    @property
    def default_id(self) -> str | None:
        """The first featured walkthrough that loaded, else the first that loaded."""
        for featured in sorted(self.featured, key=lambda f: f.rank):
            entry = self._by_id.get(featured.walkthrough_id)
            if entry is not None and entry.ok:
                return entry.id
        return next((e.id for e in self._entries if e.ok), None)


def _printable(name: str) -> str:
    """A file name as text a page can hold: bytes that are not UTF-8 (kept by Python as
    lone surrogates) become U+FFFD."""
    return os.fsencode(name).decode("utf-8", errors="replace")


def _unreadable(file: pathlib.Path) -> str | None:
    """Why ``file`` cannot be a walkthrough before it is opened, or None.

    Only regular files are read: a FIFO or a device would block start-up or never end."""
    if _printable(file.name) != file.name:
        return "the file name is not valid UTF-8"
    try:
        mode = file.stat().st_mode  # follows links
    except FileNotFoundError:
        return "a symbolic link to nothing" if file.is_symlink() else "the file vanished"
    except OSError as exc:
        return f"cannot read file ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "a directory, not a file"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    return None


def _load_one(file: pathlib.Path, classify: Classify, readers: Sequence[Reader] = ()) -> CatalogEntry:
    name = _printable(file.name)
    walkthrough_id = walkthrough_id_from_filename(name)
    try:
        if (why := _unreadable(file)) is not None:
            error = f"{name}: $: {why}"
        elif walkthrough_id in UNLINKABLE_IDS:  # "..json" would be /walkthroughs/. (see fields.py)
            error = f"{name}: $: the walkthrough id {walkthrough_id!r} cannot be a URL path segment; rename the file"
        else:
            raw = file.read_bytes()  # read once: sniffed by the readers, else parsed as a snapshot
            if readers and (opened := _read_other(raw, name, readers)) is not None:
                return CatalogEntry(walkthrough_id, name, opened[1], None, opened[0].kind, opened[2])
            snapshot = _parsed(raw, name)
            return CatalogEntry(walkthrough_id, name, snapshot, None, classify(snapshot))
    except SnapshotError as exc:
        error = str(exc)
    except OSError as exc:
        error = f"{name}: $: cannot read file ({exc.strerror or exc})"
    log.warning("could not load walkthrough: %s", error)
    return CatalogEntry(walkthrough_id, name, None, error)


_PARSED: OrderedDict[tuple[str, str], Snapshot] = OrderedDict()
_PARSED_KEEP = 8
_parsed_lock = threading.Lock()


def _parsed(raw: bytes, name: str) -> Snapshot:
    """The walkthrough folder's file parsed once per process and content: every process that serves
    (and every app a test builds) loads the folder, and the real model's export (4.8 MB, 1,825 nodes)
    takes ~1 s to validate. The same bytes give the same graph; nothing changes a loaded snapshot."""
    key = (name, hashlib.sha256(raw).hexdigest())
    with _parsed_lock:
        if key in _PARSED:
            _PARSED.move_to_end(key)
            return _PARSED[key]
    snapshot = parse_snapshot(raw, source=name)
    with _parsed_lock:
        _PARSED[key] = snapshot
        while len(_PARSED) > _PARSED_KEEP:
            _PARSED.popitem(last=False)
    return snapshot


def _read_other(raw: bytes, name: str, readers: Sequence[Reader]) -> tuple[Reader, Snapshot, Any] | None:
    """(reader, graph, payload) when a reader opens these bytes; None for a snapshot (or bad JSON:
    the snapshot parser says why)."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    reader = reader_for(readers, data)
    if reader is None:
        return None
    if len(raw) > reader.max_bytes:
        raise SnapshotError(name, "$", f"a {reader.title} larger than {reader.max_bytes // (1024 * 1024)} MB")
    snapshot, payload = reader.open(data, name)
    return reader, snapshot, payload
