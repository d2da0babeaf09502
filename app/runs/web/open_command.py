"""`python -m app open FILE [--serve]`: open your own step record (or snapshot), or a whole training run,
from the command line.

A run (issue 34) is a TRL output directory or its trainer_state.json: it goes into the run store of the
same data directory (content-addressed, DATA_DIR/runs), the recorder's step records beside it (step-records/
or records/) into the upload store, linked to their steps, and the command prints the findings, each record's
checks and the explorer's URL. A UNIPO canonical file is a run too (every entry's metrics its log, each entry
holding prompts a linked record) unless exactly one of its entries holds prompts and it fits one upload: that
file opens as the one step record it is, as before (open its directory to see it as a run). A directory of
UNIPO files, or of step records alone, is a run. A run opened again with the same files reads none of them (the
index in DATA_DIR/runs/index; a UNIPO run's records are then not checked again). Anything else is one file for the
upload store:

The file goes into the same upload store the server reads (DATA_DIR or DATABASE_URL: same quota,
same refusals by field path, a link that lasts); the command prints its URL and, for a record, what
the app recomputed against what the framework logged. `--serve` then starts the server on it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.domain.uploads import UploadRejected, UploadStore
from app.kinds.step_record.domain.opening import MAX_RECORD_BYTES
from app.kinds.step_record.engine.checks import checks, unchecked
from app.kinds.step_record.engine.step import recompute
from app.runs.domain.run_dir import STATE, NoRunLog
from app.runs.domain.run_findings import findings
from app.runs.domain.run_log import RunLogError
from app.runs.domain.run_store import RunRefused
from app.runs.domain.unipo_run import is_unipo_file, opens_as_run
from app.runs.engine.record_linking import LinkedRecord
from app.runs.engine.run_opening import open_run_dir
from app.runs.views import urls
from app.runs.web.run_cli import describe
from app.runs.web.run_pages import store_for
from app.stores.uploads import StoreUnavailable
from app.views.urls import URLS
from app.web.kind import Cli
from app.web.settings import Settings


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m app open", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path,
                        help="a GRPO step record (*.json, docs/reference/step-record.md), a snapshot, or a run: "
                             "a TRL output directory or its trainer_state.json, a UNIPO canonical file of several "
                             "recorded entries or a directory of them, a directory of step records")
    parser.add_argument("--serve", action="store_true", help="then serve the app (python -m app)")
    parser.add_argument("--follow", action="store_true",
                        help="keep reading the run folder as it grows, under one run id, until Ctrl-C (issue 50)")
    parser.add_argument("--interval", type=float, default=1.0, help="with --follow: seconds between looks (1)")
    parser.add_argument("--host", help="where the printed URL points, and --serve binds (env HOST)")
    parser.add_argument("--port", type=int, help="as --host (env PORT)")
    return parser.parse_args(argv)


def summary(entry) -> list[str]:
    """For a record: each logged value against the recomputed one (the kind's own check)."""
    record = entry.payload
    if record is None:
        return []
    result = recompute(record)
    lines = [f"{record.run.framework} {record.run.framework_version} · {record.run.model} · step "
             f"{record.run.step}: {len(record.groups)} groups, {record.token_count} tokens"]
    found = checks(record, result)
    if not found:
        lines.append(f"recomputed loss {result.loss:.6g} (the record logs no metrics to check against)")
    for c in found:
        lines.append(f"{'ok ' if c.ok else 'BAD'} {c.key}: logged {c.logged:.6g}, recomputed {c.recomputed:.6g} "
                     f"(rel {c.rel:.1e})")
    for u in unchecked(record, result):
        lines.append(f"--  {u.key}: not checked ({u.reason})")
    return lines


def _uploads(settings: Settings, cli: Cli) -> UploadStore:
    """The upload store the server of these settings reads, with every kind's reader."""
    store = UploadStore.open(settings.resolved_data_dir, settings.database_url, quota_mb=settings.upload_quota_mb,
                             cache_mb=0)
    store.classify, store.readers = cli.kinds.classify, cli.kinds.readers
    return store


def open_run(path: Path, settings: Settings, cli: Cli) -> int:
    """Store a run (its trainer_state.json: the directory's, or its newest checkpoint's) and the step records
    beside it (step-records/ or records/); print the findings, each record's checks and the explorer's link.
    Exit 1 when the run, or any record beside it, was refused (the others are stored and linked)."""
    try:
        uploads = _uploads(settings, cli)
    except StoreUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    checked: dict[str, list[str]] = {}  # each record's checks, made as it is stored (a UNIPO run keeps no payload)

    def check(linked: LinkedRecord) -> None:
        checked[linked.entry.id] = summary(linked.entry)

    try:
        opened = open_run_dir(path, store_for(settings, uploads.backend), uploads, on_record=check)
    except (NoRunLog, OSError, StoreUnavailable) as exc:  # no run there, or the upload store went away mid-way
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RunLogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except RunRefused as exc:
        print(f"error ({exc.status}): {exc}", file=sys.stderr)
        return 1
    finally:
        uploads.close()
    stored = 'stored' if opened.created else 'already stored'
    print(f"{stored} run {opened.id}: {describe(opened.log, opened.state_path)}")
    if opened.origin:
        print(f"no trainer log: the run's metrics are {opened.origin}")
    for u in opened.unipo:
        print(f"UNIPO canonical JSON {u.path.name}: {u.entries} entries, {u.records} "
              f"{'using the blueprint or ' if u.blueprint else ''}holding prompts (each a step record)"
              + (f"; metrics named {', '.join(u.renamed)} kept as unipo/…" if u.renamed else ""))
    if opened.indexed and opened.unipo:  # nothing read: the records' checks are not recomputed either
        them = "they were" if len(opened.unipo) > 1 else "it was"
        print(f"UNIPO canonical JSON unchanged since {them} read: the run's metrics and its step records' upload ids "
              "come from the index (DATA_DIR/runs/index), no entry read again; the records were checked when first "
              "stored, and each record's page recomputes its checks")
    elif opened.indexed:
        print("per-token and per-sample files unchanged since they were read: their numbers come from the index "
              "(DATA_DIR/runs/index), no file read again")
    if opened.tokens is not None:
        t = opened.tokens
        dumps = f", slime's rollout dumps: {t.rollout_files} read" if t.rollout_files else ""
        print(f"per-token files ({', '.join(t.sources)}): {t.token_files} read{dumps}, {len(t.metrics)} steps with "
              "tokens/… metrics (train/inference mismatch, gradient triage)")
    if opened.completions is not None:
        c = opened.completions
        print(f"completions tables (TRL): {c.files} read, {len(c.metrics)} steps with samples/… metrics (rewards, "
              f"advantages, ties per row); a sequence-level source, it holds no "
              f"{', '.join(lack.split(' (')[0].split(':')[0] for lack in c.lacks)}")
    if opened.rollouts is not None:
        r = opened.rollouts
        print(f"rollout dumps (verl): {r.files} read, {len(r.metrics)} steps with samples/… metrics (scores, groups "
              f"tied); a sequence-level source, it holds no "
              f"{', '.join(lack.split(' (')[0].split(':')[0] for lack in r.lacks)}")
    for f in findings(opened.log):
        print(f"- [{f.rule}] {f.sentence}")
    for r in opened.records:
        print(f"recorded step {r.step}: {'stored' if r.created else 'already stored'} as {r.entry.id} "
              f"({Path(r.path).name})")
        for line in checked.get(r.entry.id) or summary(r.entry):
            print(f"  {line}")
    if opened.unlogged:
        print(f"note: recorded step{'s' if len(opened.unlogged) > 1 else ''} "
              f"{', '.join(map(str, opened.unlogged))} not in the run's log (linked all the same)")
    for where, why in opened.refused:
        print(f"error: {where}: {why}", file=sys.stderr)
    print(f"open http://{settings.host}:{settings.port}{urls.run(opened.id)}")
    return 1 if opened.refused else 0


def _unipo_run(path: Path) -> bool:
    """A UNIPO canonical file that is a run, not one step record (domain/unipo_run.py opens_as_run)."""
    try:
        return path.is_file() and is_unipo_file(path) and opens_as_run(path, MAX_RECORD_BYTES)
    except OSError:
        return False  # the reading below says why


def main(argv: list[str], cli: Cli) -> int:
    """The record kind's `open` subcommand: store the file as the server would, print its link and
    checks, then (with --serve) start the server through `cli.serve`."""
    args = parse_args(argv)
    settings = Settings(**{k: v for k, v in {"host": args.host, "port": args.port}.items() if v is not None})
    if args.follow:
        from app.runs.web.run_follow_cli import follow_main

        return follow_main(args.file, settings, cli, max(args.interval, 0.05))
    if args.file.is_dir() or args.file.name == STATE or _unipo_run(args.file):
        status = open_run(args.file, settings, cli)
        if status == 0 and args.serve:
            return cli.serve(["--host", settings.host, "--port", str(settings.port)])
        return status
    try:
        raw = args.file.read_bytes()
    except OSError as exc:
        print(f"error: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    kinds = cli.kinds
    try:
        store = _uploads(settings, cli)
    except StoreUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        entry, created = store.add(raw, args.file.name)
    except UploadRejected as exc:
        print(f"error ({exc.status}): {exc}", file=sys.stderr)
        return 1
    except StoreUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    assert entry.snapshot is not None
    url = URLS.step(entry.id, entry.snapshot.opening_step_id)
    print(f"{'stored' if created else 'already stored'} as {entry.id} "
          f"({kinds.get(entry.kind).title if kinds.get(entry.kind) else 'view-only'})")
    for line in summary(entry):
        print(line)
    print(f"open http://{settings.host}:{settings.port}{url}")
    if args.serve:
        return cli.serve(["--host", settings.host, "--port", str(settings.port)])
    return 0
