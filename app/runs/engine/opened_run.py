"""What opening a run gives back (engine/run_opening.py, engine/unipo_opening.py): the run stored, the records this
opening linked, the whole map of recorded steps, and what was refused, read or kept in the index."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.runs.domain.run_log import RunLog
from app.runs.domain.run_store import RunStore
from app.runs.domain.trl_completions import CompletionsRead
from app.runs.domain.unipo_run import UnipoRun
from app.runs.engine.record_linking import LinkedRecord
from app.runs.engine.token_run import TokenRun


@dataclass(frozen=True)
class UnipoRead:
    """What the command says of each UNIPO file of a run: the same whether it was read now or kept in the index."""
    path: Path
    entries: int
    records: int  # entries that become step records
    blueprint: bool  # the file has blueprint.prompts, used by every entry without prompts of its own
    renamed: tuple[str, ...] = ()  # metric names kept under unipo/

    @classmethod
    def of(cls, run: UnipoRun) -> UnipoRead:
        return cls(run.path, run.entries, len(run.recorded), run.blueprint is not None, run.renamed)


@dataclass(frozen=True)
class OpenedRun:
    id: str
    created: bool
    state_path: str
    log: RunLog
    records: tuple[LinkedRecord, ...]  # this opening's, in step order
    recorded: dict[int, str]  # the run's whole map: step -> walkthrough id
    refused: tuple[tuple[str, str], ...]  # (path, why)
    tokens: TokenRun | None = None  # the per-token files read, when the directory has any
    completions: CompletionsRead | None = None  # TRL's completions/*.parquet read, when the directory has any
    indexed: bool = False  # the files' numbers came from the index (per-token and per-sample, or UNIPO's): none read
    rollouts: CompletionsRead | None = None  # verl's rollout_data_dir/{step}.jsonl read, when the directory has any
    origin: str = ""  # what the logged metrics are when no trainer logged them: UNIPO's file(s), or the records'
    unipo: tuple[UnipoRead, ...] = ()  # the UNIPO canonical files, when the run is theirs

    @property
    def unlogged(self) -> tuple[int, ...]:
        """Recorded steps the trainer logged no metrics at (a record of a step the log ends before, say)."""
        logged = set(self.log.steps)
        return tuple(s for s in self.recorded if s not in logged)


def opened_run(ident: str, created: bool, path: Path, runs: RunStore, linked: list[LinkedRecord],
            refused: list[tuple[str, str]], origin: str, unipo: tuple[UnipoRead, ...] = (),
            indexed: bool = False) -> OpenedRun:
    log = runs.get(ident)
    assert log is not None
    linked.sort(key=lambda r: r.step)
    recorded = runs.link_records(ident, {r.step: r.entry.id for r in linked}) if linked else runs.recorded(ident)
    return OpenedRun(ident, created, str(path), log, tuple(linked), recorded, tuple(refused), indexed=indexed,
                     origin=origin, unipo=unipo)


def joined(*parts: dict[int, dict[str, float]]) -> dict[int, dict[str, float]]:
    """Per-step metrics of several readers as one map (tokens/… and samples/… never clash; TRL's tables and verl's
    dumps both write samples/…, but a run is one framework's)."""
    joined: dict[int, dict[str, float]] = {}
    for part in parts:
        for step, values in part.items():
            joined[step] = joined.get(step, {}) | values
    return dict(sorted(joined.items()))



__all__ = ["OpenedRun", "UnipoRead", "joined", "opened_run"]
