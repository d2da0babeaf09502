"""`python -m app findings RUN [--json]`: what a TRL run's logged metrics say (issue 34), from the command line.

RUN is a TRL output directory (its trainer_state.json, else the newest checkpoint-N's) or the file itself.
Prints which file was read, the steps and metrics it logged, then each finding (domain/run_findings.py:
the rules, their thresholds and why) with the steps it points at; `--json` prints the same as one object.
Exit 1 for a file the reader refuses (its JSON path and why), 2 for one that cannot be read.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from app.runs.domain.run_dir import NoRunLog, find_trainer_state
from app.runs.domain.run_findings import findings
from app.runs.domain.run_log import RunLog, RunLogError, read_trainer_state
from app.web.kind import Cli


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m app findings", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a TRL output directory, or its trainer_state.json")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    return parser.parse_args(argv)


def describe(log: RunLog, source: str | None = None) -> str:
    """`source` names what was opened (the stored log's own is its run id once derived metrics joined it)."""
    source = source or log.source
    if not log.steps:
        return f"{source}: no logged steps"
    runtime = log.summary.get("train_runtime")
    return (f"{source}: {len(log.steps)} logged steps ({log.steps[0]} to {log.steps[-1]}), "
            f"{len(log.metrics)} metrics" + (f", {runtime:.0f} s of training" if runtime is not None else ""))


def main(argv: list[str], cli: Cli) -> int:
    args = parse_args(argv)
    try:
        path = find_trainer_state(args.run)
        raw = path.read_bytes()
    except (NoRunLog, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        log = read_trainer_state(raw, source=str(path))
    except RunLogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    found = findings(log)
    if args.json:
        print(json.dumps({"file": str(path), "steps": list(log.steps), "metrics": list(log.metrics),
                          "summary": log.summary, "findings": [dataclasses.asdict(f) for f in found]}))
        return 0
    print(describe(log))
    if not found:
        print("no finding: none of the rules (app/runs/domain/run_findings.py) applies to this run")
    for f in found:
        print(f"- [{f.rule}] {f.sentence} (step{'s' if len(f.steps) != 1 else ''} {', '.join(map(str, f.steps))})")
    return 0
