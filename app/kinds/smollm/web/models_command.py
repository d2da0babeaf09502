"""`python -m app models add FILE | list | remove FILE_OR_ID`: any Llama or Qwen GGUF file as a real-model
walkthrough of its own. `add` checks the file (refused with every reason, before a weight is read), makes its
walkthrough (its graph traced on the file's configuration) and remembers it in DATA_DIR/models.json, so every
later start serves it; GGUF_MODELS=FILE[:FILE…] does the same for one server's life."""
from __future__ import annotations

import argparse
import sys

from app.engine.lm.check import UnsupportedModel
from app.engine.lm.registry import ENV, describe, forget, listed, remember, remembered
from app.kinds.smollm.engine.own_models import ensure_walkthrough
from app.web.kind import Cli
from app.web.settings import Settings


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m app models", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="check a GGUF file, make its walkthrough and remember it in DATA_DIR")
    add.add_argument("file")
    sub.add_parser("list", help=f"the models this server serves (${ENV} and the remembered ones)")
    remove = sub.add_parser("remove", help="forget a remembered file (by its path or its walkthrough's id)")
    remove.add_argument("file_or_id")
    return p


def main(argv: list[str], cli: Cli) -> int:
    args = parser().parse_args(argv)
    settings = Settings()
    data_dir = settings.resolved_data_dir
    if args.action == "add":
        try:
            model = describe(args.file)
            walkthrough = ensure_walkthrough(model, data_dir)
            remember(data_dir, model.path)
        except (UnsupportedModel, FileNotFoundError, RuntimeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        cfg = model.config
        print(f"added {model.name} ({model.family}, {cfg.n_layer} blocks, width {cfg.n_embd}, "
              f"{model.check.parameters:,} parameters) as walkthrough {model.walkthrough_id}\n"
              f"  {walkthrough}\n  open /walkthroughs/{model.walkthrough_id} "
              f"(remembered in {data_dir / 'models.json'})")
        return 0
    if args.action == "remove":
        if not forget(data_dir, args.file_or_id):
            print(f"error: {args.file_or_id} is not remembered in {data_dir}", file=sys.stderr)
            return 1
        print(f"forgot {args.file_or_id}")
        return 0
    kept = set(remembered(data_dir))
    for path in listed(data_dir, settings.gguf_models):
        where = "remembered" if path in kept else f"${ENV}"
        try:
            model = describe(path)
            print(f"{model.walkthrough_id}\t{model.name}\t{path}\t({where})")
        except (UnsupportedModel, OSError) as exc:
            print(f"-\t(not served: {exc})\t{path}\t({where})")
    return 0


def models_command(argv: list[str], cli: Cli) -> int:
    return main(argv, cli)
