"""The explorer's own "follow" (issue 50): the server follows a run's folder in its own process.

A run opened from a folder on the server's disk (`python -m app open RUN_DIR`: its store row names the folder or the
trainer_state.json it read) can be followed from its explorer: POST /runs/{id}/follow starts the same `Follower` the
command line runs (engine/run_follower.py, at its own interval and CPU share) in a daemon thread, under the folder's
follow id, and the explorer at /runs/<follow id> updates in place as with the command. The folder is only ever the one
the store recorded for that id (FollowedRunStore.source), never a path from a request, and never one under the data
directory (an uploaded archive is unpacked there and removed) nor the shipped example (it never grows).

At most MAX_FOLLOWED folders are followed by the server at once (a follower is light, and its CPU share is capped,
but serving comes first): past that a follow is refused (429). A folder already followed, by the command line or the
server (a fresh heartbeat), is not followed twice: its follow id is answered. POST /runs/{follow id}/unfollow stops a
follower the server started (its state then says it ended); every one is stopped when the app stops (its lifespan).
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from app.runs.domain.run_findings import findings
from app.runs.domain.run_follow import FollowedRunStore, FollowState, follow_id, source_folder
from app.runs.engine.record_linking import Uploads
from app.runs.engine.run_follower import SETTLE_S, Follower

MAX_FOLLOWED = 4
INTERVAL_S = 1.0  # as `python -m app open RUN_DIR --follow` polls by default
JOIN_S = 10.0  # how long a stop waits for a follower's reading under way to finish (it ends by itself after)

log = logging.getLogger(__name__)


class FollowRefused(Exception):
    def __init__(self, status: int, title: str, message: str) -> None:
        self.status, self.title, self.message = status, title, message
        super().__init__(message)


@dataclass
class _Followed:
    folder: Path
    follower: Follower
    stop: threading.Event
    thread: threading.Thread


class ServerFollows:
    """The followers this server process runs, by follow id."""

    def __init__(self, runs: FollowedRunStore, uploads: Uploads, *, never: tuple[Path, ...] = (),
                 limit: int = MAX_FOLLOWED, interval: float = INTERVAL_S, settle: float = SETTLE_S) -> None:
        self.runs, self.uploads, self.limit, self.interval, self.settle = runs, uploads, limit, interval, settle
        self.never = tuple(p.resolve() for p in never)  # folders never followed, nor any folder inside them
        self._lock = threading.Lock()
        self._followed: dict[str, _Followed] = {}

    def folder(self, run_id: str) -> Path | None:
        """The folder the run `run_id` was opened from, where it is still on this disk and may be followed."""
        found = source_folder(self.runs.source(run_id))
        if found is None:
            return None
        resolved = found.resolve()
        return None if any(resolved.is_relative_to(p) for p in self.never) else found

    def _prune(self) -> None:
        for ident in [i for i, f in self._followed.items() if not f.thread.is_alive()]:
            del self._followed[ident]

    def owns(self, ident: str) -> bool:
        with self._lock:
            self._prune()
            return ident in self._followed

    def follow(self, run_id: str) -> str:
        """Follow the folder run `run_id` was opened from (unless it is followed already); its follow id."""
        folder = self.folder(run_id)
        if folder is None:
            raise FollowRefused(404, "Nothing here to follow",
                                f"run {run_id!r} was not opened from a folder still on this server's disk "
                                "(`python -m app open RUN_DIR` stores one that is; an uploaded archive's is not)")
        ident = follow_id(folder)
        now = time.time()
        with self._lock:
            self._prune()
            if ident in self._followed:
                return ident
            state = self.runs.follows.read(ident)
            if state is not None and state.following(now):
                return ident  # followed already (`python -m app open RUN_DIR --follow`, or another server)
            if len(self._followed) >= self.limit:
                raise FollowRefused(429, "Too many folders followed",
                                    f"this server follows {len(self._followed)} folders already, its most at once: "
                                    "stop following one (its explorer's \"Stop following\"), or follow this one "
                                    "from the command line (`python -m app open RUN_DIR --follow`)")
            self.runs.follows.write(self._seed(ident, folder, run_id, state, now))
            # its CPU share measured on its own thread: the server's requests meanwhile are not its cost
            follower = Follower(folder, self.runs, self.uploads, settle=self.settle, cpu_clock=time.thread_time,
                                say=lambda line: log.info("following %s: %s", folder, line))
            stop = threading.Event()
            thread = threading.Thread(target=self._run, args=(follower, stop), name=f"follow-{ident}", daemon=True)
            self._followed[ident] = _Followed(folder, follower, stop, thread)
            thread.start()
        log.info("following %s as run %s (from the explorer)", folder, ident)
        return ident

    def _seed(self, ident: str, folder: Path, run_id: str, state: FollowState | None, now: float) -> FollowState:
        """The state the explorer reads until the follower's first look: the version it came from (so
        /runs/<follow id> answers at once), said to be followed."""
        if state is not None and state.run and self.runs.stored(state.run):
            return dataclasses.replace(state, ended=False, heartbeat=now)
        run = self.runs.resolve(run_id)
        steps = self.runs.get(run)
        if steps is None:
            return FollowState(ident, str(folder), heartbeat=now)
        return FollowState(ident, str(folder), run=run, steps=len(steps.steps),
                           last_step=steps.steps[-1] if steps.steps else None,
                           findings=tuple(f.rule for f in findings(steps)), heartbeat=now)

    def _run(self, follower: Follower, stop: threading.Event) -> None:
        try:
            follower.run(self.interval, stop.is_set)
        except Exception:  # noqa: BLE001 - a follower's failure ends it (said ended), never the server
            log.exception("following %s failed", follower.folder)

    def unfollow(self, ident: str) -> bool:
        """Stop the server's follower of `ident` (its state then says it ended); False when it runs none."""
        with self._lock:
            self._prune()
            followed = self._followed.pop(ident, None)
        if followed is None:
            return False
        followed.stop.set()
        followed.thread.join(JOIN_S)
        log.info("stopped following %s (run %s)", followed.folder, ident)
        return True

    def stop_all(self) -> None:
        with self._lock:
            followed, self._followed = list(self._followed.values()), {}
        for f in followed:
            f.stop.set()
        deadline = time.monotonic() + JOIN_S
        for f in followed:
            f.thread.join(max(0.0, deadline - time.monotonic()))


__all__ = ["MAX_FOLLOWED", "FollowRefused", "ServerFollows"]
