"""`python -m app open FILE [--serve]`: open your own step record (or snapshot) from the command line.

The file goes into the same upload store the server reads (DATA_DIR or DATABASE_URL: same quota,
same refusals by field path, a link that lasts); the command prints its URL and, for a record, what
the app recomputed against what the framework logged. `--serve` then starts the server on it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.domain.uploads import UploadRejected, UploadStore
from app.kinds.step_record.engine.checks import checks, unchecked
from app.kinds.step_record.engine.recompute import recompute
from app.stores.uploads import StoreUnavailable
from app.views.urls import URLS
from app.web.kind import Cli
from app.web.settings import Settings


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m app open", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path,
                        help="a GRPO step record (*.json, docs/reference/step-record.md) or a snapshot")
    parser.add_argument("--serve", action="store_true", help="then serve the app (python -m app)")
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


def main(argv: list[str], cli: Cli) -> int:
    """The record kind's `open` subcommand: store the file as the server would, print its link and
    checks, then (with --serve) start the server through `cli.serve`."""
    args = parse_args(argv)
    settings = Settings(**{k: v for k, v in {"host": args.host, "port": args.port}.items() if v is not None})
    try:
        raw = args.file.read_bytes()
    except OSError as exc:
        print(f"error: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    kinds = cli.kinds
    store = UploadStore.open(settings.resolved_data_dir, settings.database_url, quota_mb=settings.upload_quota_mb,
                             cache_mb=0)
    store.classify, store.readers = kinds.classify, kinds.readers
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
