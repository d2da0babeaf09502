"""Following a run folder as it grows (issue 50): each poll looks at every file's size and mtime
(domain/run_follow.py `scan`), and when something changed opens the folder as `python -m app open` does
(engine/run_opening.py, with its read index: the per-token and per-sample files read before are not read again),
stores the new version and points the folder's stable id at it (domain/run_follow.py). One line per update.

A refusal of a file still being written (a trainer_state.json cut mid-write, a parquet without its footer, a .pt
that fails to load, while its size or mtime still changes or within the settle time) is never said nor kept: the
folder is read again when it settles, and only a refusal of a settled file is said (once). A failed opening stores
nothing (run_store.py refuses before writing), so a half-written trainer_state.json leaves the version before it.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from app.runs.domain.run_deletion import UnknownRun, delete_run
from app.runs.domain.run_dir import NoRunLog, find_trainer_state
from app.runs.domain.run_findings import findings
from app.runs.domain.run_follow import (
    HEARTBEAT_S,
    FollowState,
    FollowStates,
    Snapshot,
    follow_id,
    fresh,
    named_file,
    scan,
    unstable_steps,
)
from app.runs.domain.run_log import RunLogError
from app.runs.domain.run_store import RunRefused, RunStore
from app.runs.engine.record_linking import Uploads
from app.runs.engine.run_opening import OpenedRun, open_run_dir

SETTLE_S = 3.0
# The follower's share of one core: after a reading that took C s of CPU (a long log is parsed and checked whole, and
# its findings computed), the next waits at least C / CPU_SHARE s. A 2,000-step log (0.9 MB) is then read every ~2 s.
CPU_SHARE = 0.04


class Follower:
    def __init__(self, folder: Path, runs: RunStore, uploads: Uploads, *, settle: float = SETTLE_S,
                 clock: Callable[[], float] = time.time, say: Callable[[str], None] = print,
                 cpu_share: float = CPU_SHARE, cpu_clock: Callable[[], float] = time.process_time) -> None:
        """`cpu_clock`: what a reading's CPU is measured by; the process's (the command's own process), or in a
        server that follows (web/run_follow_server.py) the thread's, so the requests it serves meanwhile are not
        counted as the follower's."""
        self.folder, self.runs, self.uploads = folder, runs, uploads
        self.settle, self.clock, self.say, self.cpu_share = settle, clock, say, cpu_share
        self.cpu_clock = cpu_clock
        self.states = FollowStates(runs.root / "follow")
        self.id = follow_id(folder)
        old = self.states.read(self.id)
        self.state = dataclasses.replace(old, ended=False) if old is not None else FollowState(self.id, str(folder))
        self._seen: Snapshot = {}  # the last look
        self._read: Snapshot | None = None  # the files as they were at the last complete reading
        self._said: set[str] = set()  # refusals and waits said already
        self._signature: tuple | None = None
        self._next_read = 0.0  # monotonic: no reading before (CPU_SHARE)

    def _beat(self, now: float, force: bool = False) -> None:
        if force or now - self.state.heartbeat >= HEARTBEAT_S:
            self.state = dataclasses.replace(self.state, heartbeat=now)
            self.states.write(self.state)

    def _once(self, line: str) -> None:
        if line not in self._said:
            self._said.add(line)
            self.say(line)

    def poll(self) -> bool:
        """One look; True when a new version was stored."""
        now = self.clock()
        before, files = self._seen, scan(self.folder)
        self._seen = files
        if files == self._read:
            self._beat(now)
            return False
        if time.monotonic() < self._next_read:  # the last reading's cost not yet paid for
            self._beat(now)
            return False
        if waiting := unstable_steps(self.folder, files, now):
            self._once(f"waiting for {', '.join(waiting)}/STABLE (prime-rl marks a step once every rank flushed)")
            self._beat(now)
            return False
        cpu = self.cpu_clock()
        try:
            return self._open(now, before, files)
        finally:
            self._next_read = time.monotonic() + (self.cpu_clock() - cpu) / self.cpu_share

    def _open(self, now: float, before: Snapshot, files: Snapshot) -> bool:
        try:
            opened = open_run_dir(self.folder, self.runs, self.uploads)
        except NoRunLog:
            self._once(f"waiting for {self.folder} to hold a run's files")
            self._beat(now)
            return False
        except (RunLogError, RunRefused, OSError) as exc:
            where = self._state_file()
            if where is None or not fresh(where, before, files, now, self.settle):
                self._once(f"error: {exc}")
                self._read = files  # said; read again when a file changes
            self._beat(now)
            return False
        pending = [(w, why) for w, why in opened.refused
                   if (p := named_file(w, files)) is not None and fresh(p, before, files, now, self.settle)]
        for where, why in opened.refused:
            if (where, why) not in pending:
                self._once(f"error: {where}: {why}")
        self._read = None if pending else files  # a file still being written: read again at the next look
        changed = self._store(opened, now)
        self._beat(now)
        return changed

    def _state_file(self) -> str | None:
        try:
            return str(find_trainer_state(self.folder))
        except (NoRunLog, OSError):
            return None

    def _store(self, opened: OpenedRun, now: float) -> bool:
        log = opened.log
        signature = (opened.id, len(log.steps), len(log.names), len(opened.recorded),
                     sum(len(v) for v in self.runs.derived(opened.id).values()))
        if signature == self._signature and self.state.run == opened.id:
            return False
        self._signature = signature
        rules = tuple(f.rule for f in findings(log))
        previous = self.state
        new_steps = len(log.steps) - previous.steps if previous.run else len(log.steps)
        new_rules = [r for r in rules if r not in previous.findings]
        owned = opened.created or (previous.owned and previous.run == opened.id)
        self.state = dataclasses.replace(previous, run=opened.id, version=previous.version + 1, steps=len(log.steps),
                                         last_step=log.steps[-1] if log.steps else None, findings=rules, updated=now,
                                         heartbeat=now, owned=owned)
        self.states.write(self.state)
        if previous.run and previous.run != opened.id and previous.owned:
            try:
                delete_run(self.runs, previous.run)  # the version before: its data is all in the new one
            except (UnknownRun, OSError):
                pass
        last = f", last step {log.steps[-1]}" if log.steps else ""
        found = f"; new finding{'s' if len(new_rules) > 1 else ''}: {', '.join(new_rules)}" if new_rules else ""
        self.say(f"update {self.state.version}: {len(log.steps)} step{'s' if len(log.steps) != 1 else ''} "
                 f"(+{max(new_steps, 0)}){last}, "
                 f"{len(opened.recorded)} recorded, {len(rules)} finding{'s' if len(rules) != 1 else ''}{found}")
        return True

    def end(self) -> None:
        self.state = dataclasses.replace(self.state, ended=True, heartbeat=self.clock())
        self.states.write(self.state)

    def run(self, interval: float, stop: Callable[[], bool] = lambda: False) -> None:
        """Poll every `interval` seconds until `stop()` (or Ctrl-C, which the caller catches); then say it ended."""
        try:
            self._beat(self.clock(), force=True)
            while not stop():
                started = time.monotonic()
                self.poll()
                time.sleep(max(0.0, interval - (time.monotonic() - started)))
        finally:
            self.end()


__all__ = ["CPU_SHARE", "SETTLE_S", "Follower"]
