"""Where a TRL run keeps its logged metrics: `trainer_state.json` in the output directory (written when the
script calls `trainer.save_state()`) or in each `checkpoint-N/` the Trainer saves; the newest wins."""
from __future__ import annotations

import re
from pathlib import Path

STATE = "trainer_state.json"
_CHECKPOINT = re.compile(r"checkpoint-(\d+)\Z")


class NoRunLog(FileNotFoundError):
    pass


def find_trainer_state(path: Path) -> Path:
    """`path` itself when it is a file; else its trainer_state.json; else that of its highest checkpoint-N."""
    if path.is_file():
        return path
    if not path.is_dir():
        raise NoRunLog(f"{path}: no such file or directory")
    if (path / STATE).is_file():
        return path / STATE
    checkpoints = sorted(((int(m.group(1)), p) for p in path.iterdir()
                          if p.is_dir() and (m := _CHECKPOINT.match(p.name)) and (p / STATE).is_file()),
                         key=lambda pair: pair[0])
    if not checkpoints:
        raise NoRunLog(f"{path}: no {STATE} here or in a checkpoint-N/ folder (TRL writes it at each checkpoint "
                       "and on trainer.save_state())")
    return checkpoints[-1][1] / STATE
