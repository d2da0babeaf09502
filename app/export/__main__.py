"""`python -m app.export`: trace a model into a walkthrough file (see app/export/__init__.py).

An entry point, like `python -m app`: the models it knows are the kinds' (`Kind.export_targets`),
asked of the house; the exporter's library (the rest of app/export) names no kind."""
from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import pathlib
import sys
import time
from datetime import datetime


def _targets() -> dict:
    from app.house import registry

    return registry().export_targets


TARGETS = _targets()


def _iso(text: str) -> str:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return text


def parser() -> argparse.ArgumentParser:
    models = "\n".join(f"  {t.name}: {t.description}" for t in TARGETS.values())
    p = argparse.ArgumentParser(
        prog="python -m app.export",
        description="Trace a torch model (one forward pass of example inputs) into a tensorviz.graph\n"
                    "version 3 walkthrough that the app loads: nodes, module groups, edges at both levels,\n"
                    "a layered layout, and the steps of an authored steps file with computed cameras.\n"
                    "The file is read back by the app's own loader before it is written.",
        epilog=f"models:\n{models}\n\nexample:\n  python -m app.export --model toy_grpo "
               "--steps walkthroughs/steps/toy_grpo.steps.json --out toy.tensorviz.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, choices=sorted(TARGETS), help="which model to trace")
    p.add_argument("--steps", required=True, type=pathlib.Path, metavar="FILE",
                   help="authored steps file (JSON: title, viewport, steps with id, title, note, expanded, selected)")
    p.add_argument("--out", required=True, type=pathlib.Path, metavar="FILE",
                   help="file to write, e.g. walkthroughs/mine.tensorviz.json (its name, less .tensorviz.json, "
                        "is the walkthrough's id in the app)")
    p.add_argument("--from", dest="source", type=pathlib.Path, default=None, metavar="FILE",
                   help="trace the model on this file's configuration (a GGUF file's sizes), for models that take one")
    p.add_argument("--exported-at", type=_iso, default=None, metavar="TIME",
                   help="the file's exportedAt (ISO 8601); default: $SOURCE_DATE_EPOCH if set, else now. "
                        "Fix it for byte-identical exports")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from app.domain.snapshot import SnapshotError  # after parsing: --help and usage errors need no torch
    from app.export.document import export, timestamp, write
    from app.export.steps import StepsError, read_steps

    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    try:
        exported_at = args.exported_at or timestamp(float(epoch) if epoch else None)
    except ValueError:
        print(f"error: SOURCE_DATE_EPOCH={epoch!r} is not a number of seconds", file=sys.stderr)
        return 2
    started = time.perf_counter()
    target = TARGETS[args.model]
    if args.source is not None:
        if target.from_file is None:
            print(f"error: --from: model {args.model} is traced on its own configuration only", file=sys.stderr)
            return 2
        if not args.source.is_file():
            print(f"error: --from: no such file: {args.source}", file=sys.stderr)
            return 2
        target = dataclasses.replace(target, build=functools.partial(target.from_file, args.source))
    try:
        text = export(target, read_steps(args.steps), exported_at)
    except StepsError as exc:
        print(f"error: {args.steps}: {exc}", file=sys.stderr)
        return 1
    except SnapshotError as exc:  # a bug in the exporter: the app's own loader refused its file
        print(f"error: the export does not load: {exc}", file=sys.stderr)
        return 1
    write(text, args.out)
    print(f"wrote {args.out} ({len(text.encode()):,} bytes) in {time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
