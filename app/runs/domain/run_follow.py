"""A run followed as it grows (issue 50, `python -m app open RUN_DIR --follow`): one stable id for the folder, the
follower's state where the web process reads it, and which of the folder's files are still being written.

- **The id** is the folder's, not its content's: the first 16 hex digits of sha256("follow\\0" + its resolved path).
  A run's stored file stays content-addressed (run_store.py: each version the follower stores is a run of its own,
  and the follower deletes the version before it once the new one is stored, so the quota holds one copy), and
  `DATA_DIR/runs/follow/<id>.json` says which stored version the followed id stands for now. The explorer's URL,
  `/runs/<follow id>`, therefore never changes as the run grows, and following the same folder again (after a
  restart of the follower, or of the trainer) gives the same URL. `FollowedRunStore` resolves a followed id on every
  read (get, recorded, derived, stored), so every page of a run (its diff, its JSON) takes the followed id too.
- **The state** (that file, written to a temporary name and renamed): the folder, the stored version's id, a
  version number bumped at every update, the steps, the last step, the findings, when the data last changed
  (`updated`) and the follower's heartbeat (`heartbeat`, written at least every HEARTBEAT_S). A page shows the run as
  followed while the heartbeat is younger than STALE_S and the follower did not say it ended (Ctrl-C).
- **Still being written**: a file whose size or mtime changed since the last look, or whose mtime is younger than the
  settle time, is fresh: a refusal of it is not said, the folder is read again when it settles (`fresh`). A prime-rl
  `token_exports/step_N/` folder without its STABLE marker (written once every rank flushed, token_export.py at
  559b447 `mark_stable`) is not read until the marker lands (or it has not changed for UNSTABLE_GIVE_UP_S: a run that
  died mid-step).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.runs.domain.run_dir import STATE, run_root
from app.runs.domain.run_log import RunLog
from app.runs.domain.run_store import RUN_ID, RunStore

STALE_S = 30.0  # a heartbeat older than this: the follower is gone, the page stops polling
HEARTBEAT_S = 5.0
UNSTABLE_GIVE_UP_S = 120.0
_CHECKPOINT = re.compile(r"checkpoint-\d+\Z")
_STEP_DIR = re.compile(r"step_(\d+)\Z")

Snapshot = dict[str, tuple[int, int]]  # file path -> (size, mtime_ns)


def follow_id(folder: Path) -> str:
    return hashlib.sha256(b"follow\0" + str(folder.resolve()).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class FollowState:
    id: str
    folder: str
    run: str | None = None  # the stored version's own (content) id
    version: int = 0
    steps: int = 0
    last_step: int | None = None
    findings: tuple[str, ...] = ()  # the rules that speak
    updated: float = 0.0  # when the stored data last changed
    heartbeat: float = 0.0
    ended: bool = False  # the follower stopped (Ctrl-C)
    owned: bool = False  # the follower stored `run` itself (so it deletes it when a newer version replaces it)

    def following(self, now: float) -> bool:
        return not self.ended and now - self.heartbeat < STALE_S


class FollowStates:
    """`root` (DATA_DIR/runs/follow): one small JSON file per followed folder, by its follow id."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, ident: str) -> Path:
        if not RUN_ID.match(ident):
            raise KeyError(ident)
        return self.root / f"{ident}.json"

    def read(self, ident: str) -> FollowState | None:
        try:
            raw = json.loads(self.path(ident).read_text())
            return FollowState(**{**raw, "findings": tuple(raw.get("findings", ()))})
        except (KeyError, OSError, ValueError, TypeError):
            return None

    def all(self) -> list[FollowState]:
        """Every followed folder's state, by id (a file that is no state is skipped)."""
        if not self.root.is_dir():
            return []
        names = sorted(p.name.removesuffix(".json") for p in self.root.glob("*.json"))
        return [s for name in names if RUN_ID.match(name) and (s := self.read(name)) is not None]

    def remove(self, ident: str) -> bool:
        """Forget a followed folder (its run deleted): False when no state file was there."""
        try:
            self.path(ident).unlink()
        except (KeyError, FileNotFoundError):
            return False
        return True

    def write(self, state: FollowState) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f".{state.id}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(dataclasses.asdict(state), out)
            os.replace(tmp, self.path(state.id))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class FollowedRunStore(RunStore):
    """The run store, where a followed folder's id reads as the version stored for it now."""

    @property
    def follows(self) -> FollowStates:
        return FollowStates(self.root / "follow")

    def resolve(self, ident: str) -> str:
        state = self.follows.read(ident) if RUN_ID.match(ident) else None
        return state.run if state is not None and state.run else ident

    def get(self, ident: str) -> RunLog | None:
        return super().get(self.resolve(ident))

    def source(self, ident: str) -> str:
        """Where the run was opened from, as this store recorded it (never as a request says): a followed id's
        folder, else its row's name (the trainer_state.json or folder `python -m app open` read); "" if unknown."""
        state = self.follows.read(ident) if RUN_ID.match(ident) else None
        if state is not None:
            return state.folder
        if self.refs is None:
            return ""
        return next((row.name for row in self.refs.run_listing() if row.id == ident), "")

    def recorded(self, ident: str) -> dict[int, str]:
        return super().recorded(self.resolve(ident))

    def derived(self, ident: str) -> dict[int, dict[str, float]]:
        return super().derived(self.resolve(ident))

    def config(self, ident: str) -> dict[str, Any] | None:
        return super().config(self.resolve(ident))

    def stored(self, ident: str) -> bool:
        return super().stored(self.resolve(ident))


def source_folder(source: str) -> Path | None:
    """The run folder a recorded source names, where it still is on this machine's disk: the folder itself, or the
    output directory of the trainer_state.json it was read from (one up from a checkpoint-N/). None for anything else:
    no source, a relative name, a folder gone (an uploaded archive's, unpacked and removed), another kind of file."""
    if not source:
        return None
    path = Path(source)
    if not path.is_absolute():
        return None
    try:
        if path.is_dir():
            return path
        if path.name == STATE and path.is_file():
            return run_root(path, path)
    except OSError:
        return None
    return None


def scan(folder: Path) -> Snapshot:
    """Every file under the folder with its size and mtime; in a checkpoint-N/ folder only its trainer_state.json
    (the weights beside it are never read)."""
    out: Snapshot = {}
    stack = [folder]
    while stack:
        here = stack.pop()
        try:
            entries = list(os.scandir(here))
        except OSError:
            continue
        checkpoint = _CHECKPOINT.match(here.name) is not None
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if not checkpoint:
                        stack.append(Path(e.path))
                elif e.is_file(follow_symlinks=False) and (not checkpoint or e.name == "trainer_state.json"):
                    st = e.stat(follow_symlinks=False)
                    out[e.path] = (st.st_size, st.st_mtime_ns)
            except OSError:
                continue
    return out


def fresh(path: str, before: Snapshot, now_seen: Snapshot, now: float, settle: float) -> bool:
    """Still being written: changed between two looks, gone, or touched less than `settle` seconds ago."""
    seen = now_seen.get(path)
    return seen is None or before.get(path) != seen or now - seen[1] / 1e9 < settle


def named_file(where: str, files: Snapshot) -> str | None:
    """The file a refusal names (its message starts with the path, or holds it): the longest that matches."""
    hits = [p for p in files if where == p or where.startswith(p) or p in where]
    return max(hits, key=len) if hits else None


def unstable_steps(folder: Path, files: Snapshot, now: float) -> list[str]:
    """prime-rl's token_exports/step_N/ folders still without STABLE (and written to in the last
    UNSTABLE_GIVE_UP_S): read only once the marker lands."""
    exports = str(folder / "token_exports") + os.sep
    dirs: dict[str, float] = {}
    stable: set[str] = set()
    for path, (_, mtime) in files.items():
        if not path.startswith(exports):
            continue
        step_dir, _, name = path.rpartition(os.sep)
        if not _STEP_DIR.match(os.path.basename(step_dir)):
            continue
        if name == "STABLE":
            stable.add(step_dir)
        dirs[step_dir] = max(dirs.get(step_dir, 0.0), mtime / 1e9)
    return sorted(os.path.relpath(d, folder) for d, newest in dirs.items()
                  if d not in stable and now - newest < UNSTABLE_GIVE_UP_S)


__all__ = ["HEARTBEAT_S", "STALE_S", "FollowState", "FollowStates", "FollowedRunStore", "Snapshot", "follow_id",
           "fresh", "named_file", "scan", "source_folder", "unstable_steps"]
