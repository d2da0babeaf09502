"""Build the tiny LM's base checkpoints: `python -m app base-model [--task addition|sums|student]` (or
`make base-model`), the kind's own subcommand (Kind.commands).

Trains with the fixed recipe (engine/base_training.py), writes the weights as safetensors
and, beside them, a JSON card: the recipe, the seed, the final loss, the sha256 of the file and
of the weights. Deterministic for the recipe on one machine; see docs/how-to/rebuild-checkpoints.md.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import time
from dataclasses import replace
from pathlib import Path

import torch
from safetensors.torch import save_file

from app.kinds.tiny_lm.engine.base_training import BaseRecipe, recipe_dict, state_digest, train_base
from app.kinds.tiny_lm.engine.sums_base import STUDENT_MODEL, SUMS_MODEL, SUMS_RECIPE, train_sums_base

# addition: the token walkthrough's model; sums: the training paths' base;
# student: distillation's own start, smaller, pre-trained like the sums base.
DEFAULT_OUT = {"addition": Path("walkthroughs/models/tiny_lm_base.safetensors"),
               "sums": Path("walkthroughs/models/tiny_lm_sums_base.safetensors"),
               "student": Path("walkthroughs/models/tiny_lm_sums_student.safetensors")}
MODELS = {"addition": None, "sums": SUMS_MODEL, "student": STUDENT_MODEL}


def command(argv: list[str], _cli: object = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app base-model", description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=tuple(DEFAULT_OUT), default="addition", help="which checkpoint")
    parser.add_argument("--out", type=Path, default=None, help="weights file (default: the task's, under "
                        "walkthroughs/models/)")
    parser.add_argument("--steps", type=int, default=None, help="override the recipe's step count (for tests)")
    parser.add_argument("--seed", type=int, default=BaseRecipe.seed, help="the recipe's seed")
    args = parser.parse_args(argv)
    args.out = args.out or DEFAULT_OUT[args.task]
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be at least 1")

    sums = args.task != "addition"
    recipe = replace(SUMS_RECIPE if sums else BaseRecipe(), seed=args.seed,
                     **({"steps": args.steps} if args.steps is not None else {}))
    losses: list[float] = []
    started = time.perf_counter()
    cfg = MODELS[args.task]
    record = lambda _step, loss: losses.append(loss)  # noqa: E731
    model = train_sums_base(recipe, progress=record, cfg=cfg) if cfg else train_base(recipe, progress=record)
    seconds = time.perf_counter() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # float32 on disk keeps the file small (~0.4 MB); the engine loads it into float64.
    state = {k: v.detach().float().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(args.out), metadata={"recipe": json.dumps(recipe_dict(recipe, cfg), sort_keys=True)})
    card: dict[str, object] = {
        "task": args.task,
        "recipe": recipe_dict(recipe, cfg),
        "final_loss": losses[-1] if losses else None,
        "first_loss": losses[0] if losses else None,
        "file_sha256": hashlib.sha256(args.out.read_bytes()).hexdigest(),
        "weights_sha256_float64": state_digest(model),
        "train_seconds": round(seconds, 1),
        "torch_threads": torch.get_num_threads(),  # float sums are ordered by thread: rebuild with as many
        "rebuild": "make base-model" + ("" if args.task == "addition" else f" BASE_TASK={args.task}"),
    }
    args.out.with_suffix(".json").write_text(json.dumps(card, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes) in {seconds:.1f} s; "
          f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; sha256 {str(card['file_sha256'])[:16]}…")
    return 0

