"""An operator deletes a stored run (`python -m app runs delete ID`): its file, its sidecars, its row, its links and
(PostgreSQL) the large object holding its bytes, so the quota is freed of exactly what it counted for the run.

An id is 16 hex digits, nothing else: every name removed is built from it under the store's own folder, so no id
("../x", an absolute path) reaches outside it. The run's recorded steps are uploads of their own (each a walkthrough
with its own link, perhaps shared, perhaps recorded by another run too): they stay in the upload store, and only their
link to the run goes (the deletion says which; `python -m app.uploads delete ID` removes one).

The file is first renamed out of the way (`.<id>.deleting`), so no reader finds it, nor adopts it as a run stored
before rows; then the rows go in one transaction; then the files. Should the database refuse, the file is put back and
nothing is lost; should the process die in between, the run's remains are still listed and deleting it again finishes
the job. A log another process keeps in memory is not served once the run is gone (RunStore.get checks `stored`).
The read index of the folder it was opened from (DATA_DIR/runs/index: what the readers made of that folder's files,
counted in no quota) is the folder's, not the run's, and stays: opening the folder again stores the run again.
With PostgreSQL replicas, another machine's own copy of the file is on its disk: delete there too.

A followed folder's id (domain/run_follow.py: DATA_DIR/runs/follow/<id>.json names the version it stands for) is
deleted as that version, and its state file goes with it (`delete_with_follows`); deleting a version removes every
state file that names it too, so no followed id is left pointing at a run that no longer exists. A folder followed now
(a fresh heartbeat, not ended) is refused (StillFollowed): its follower would store it again at its next look.
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from app.runs.domain.run_follow import FollowState, FollowStates
from app.runs.domain.run_listing import SIDECARS
from app.runs.domain.run_store import RUN_ID, RunStore


class UnknownRun(LookupError):
    """No run of this id is stored (or it is no id at all: not 16 hex digits)."""

    def __init__(self, ident: str) -> None:
        self.ident = ident
        super().__init__(ident)


@dataclass(frozen=True)
class DeletedRun:
    id: str
    freed: int  # the bytes the quota counted for it, freed now
    files: tuple[str, ...]  # the names removed from the store's folder
    unlinked: dict[int, str]  # recorded step -> its upload's id: the upload stays, its link to the run is gone
    row: bool  # whether a database row went with it
    followed: tuple[str, ...] = ()  # the followed ids whose state file went with it (domain/run_follow.py)


class StillFollowed(Exception):
    """The run is a folder followed now (or the version one stands for): stop its follower first."""

    def __init__(self, state: FollowState) -> None:
        self.state = state
        super().__init__(state.id)


def staged(store: RunStore, ident: str) -> Path:
    return store.root / f".{ident}.deleting"


def _files(store: RunStore, ident: str) -> list[Path]:
    """Every file the store keeps for the run (those there now): built from the checked id, under its root."""
    path = store.path(ident)  # KeyError for anything but 16 hex digits
    return [p for p in (path, *(path.with_suffix(s) for s in SIDECARS), staged(store, ident)) if p.exists()]


def deletable(store: RunStore) -> set[str]:
    """Every id the store keeps anything for: rows, run files, sidecars, a deletion left half-way."""
    ids = set(store.refs.run_ids()) if store.refs is not None else set()
    if store.root.is_dir():
        for p in store.root.iterdir():
            name = p.name.removeprefix(".").removesuffix(".deleting")
            for suffix in (*SIDECARS, ".json"):
                name = name.removesuffix(suffix)
            if RUN_ID.match(name):
                ids.add(name)
    return ids


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _links(store: RunStore, ident: str) -> dict[int, str]:
    links = store.refs.run_records(ident) if store.refs is not None else {}
    try:
        sidecar = json.loads(store.path(ident).with_suffix(SIDECARS[0]).read_text())
        return {int(s): str(u) for s, u in sidecar.items()} | links
    except (OSError, ValueError, AttributeError):
        return links


def delete_run(store: RunStore, ident: str) -> DeletedRun:
    """Remove the run `ident` and everything the store keeps for it; UnknownRun when it keeps nothing of that id."""
    if not RUN_ID.match(ident):
        raise UnknownRun(ident)
    files, path, hold = _files(store, ident), store.path(ident), staged(store, ident)
    referenced = store.refs is not None and store.refs.run_sha256(ident) is not None
    if not files and not referenced:
        raise UnknownRun(ident)
    if store.refs is None:  # what total_bytes counts: the run's .json files
        freed = sum(_size(p) for p in files if p.name.endswith(".json"))
    elif referenced:
        freed = next(r.size for r in store.refs.run_listing() if r.id == ident)
    else:  # a file from before rows, counted as it is (a file set aside by a deletion cut short is counted by none)
        freed = _size(path)
    unlinked = _links(store, ident)
    if path.exists():
        os.replace(path, hold)
    try:
        row = store.refs.delete_run(ident) if store.refs is not None else False
    except BaseException:
        if hold.exists() and not path.exists():
            os.replace(hold, path)  # nothing lost: the run is as it was
        raise
    removed = []
    for p in (hold, path, *(path.with_suffix(s) for s in SIDECARS)):  # `path` again: a replica may have restored it
        if p.exists():
            p.unlink(missing_ok=True)
            removed.append(p.name)
    with store._lock:
        store._logs.pop(ident, None)
    shown = [path.name if name == hold.name else name for name in removed]
    return DeletedRun(ident, freed, tuple(dict.fromkeys(shown)), dict(sorted(unlinked.items())), row)


def follow_states(store: RunStore) -> FollowStates:
    return FollowStates(store.root / "follow")


def _pointing(store: RunStore, ident: str) -> tuple[FollowState | None, list[FollowState]]:
    """The followed id's own state (None when `ident` is a version's id), and every state naming `ident` or the
    version it stands for."""
    follows = follow_states(store)
    own = follows.read(ident) if RUN_ID.match(ident) else None
    target = own.run if own is not None else ident
    return own, [s for s in follows.all() if s.id == ident or (target and s.run == target)]


def still_followed(store: RunStore, ident: str, now: float) -> FollowState | None:
    """The follower that would store `ident` again (it follows now): deleting it is refused."""
    return next((s for s in _pointing(store, ident)[1] if s.following(now)), None)


def delete_with_follows(store: RunStore, ident: str, now: float) -> DeletedRun:
    """`delete_run`, where `ident` may also be a followed folder's id (the version it stands for is deleted), and
    every follow state naming the deleted version goes too. StillFollowed while a follower runs; UnknownRun when
    there is nothing of that id."""
    own, pointing = _pointing(store, ident)
    if (live := next((s for s in pointing if s.following(now)), None)) is not None:
        raise StillFollowed(live)
    target = own.run if own is not None else ident
    try:
        if not target:
            raise UnknownRun(ident)
        deleted = delete_run(store, target)
    except UnknownRun:
        if own is None:
            raise
        deleted = DeletedRun(ident, 0, (), {}, False)  # its version gone already: only the state file is left
    follows = follow_states(store)
    return dataclasses.replace(deleted, followed=tuple(s.id for s in pointing if follows.remove(s.id)))


__all__ = ["DeletedRun", "StillFollowed", "UnknownRun", "delete_run", "delete_with_follows", "deletable",
           "follow_states", "still_followed"]
