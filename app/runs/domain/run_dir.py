"""Where a TRL run keeps its logged metrics: `trainer_state.json` in the output directory (written when the
script calls `trainer.save_state()`) or in each `checkpoint-N/` the Trainer saves; the newest wins. And where
the other files of a run directory are (step records, TRL's completions tables), and what a directory that holds
none of them was searched for."""
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


# Where the project's recorder (recorders/trl.py) writes a run's step records: its default record_dir
# (OUTPUT_DIR/step-records), or records/ (the shipped example's, and what a script passing record_dir="records"
# gets). Each is step-N.grpo-step.json; the step a record is of is read from the record, never from its name.
RECORD_DIRS = ("step-records", "records")
RECORD_GLOB = "*.grpo-step.json"


# transformers' Trainer._save: torch.save(self.args, os.path.join(output_dir, TRAINING_ARGS_NAME)), in the output
# directory and in each checkpoint-N/ (src/transformers/trainer.py at 000945a9)
TRAINING_ARGS = "training_args.bin"


def find_training_args(root: Path, state: Path) -> Path | None:
    """The training_args.bin beside the trainer_state.json read (a checkpoint's own), else the output directory's."""
    return next((p for p in (state.parent / TRAINING_ARGS, root / TRAINING_ARGS) if p.is_file()), None)


def run_root(path: Path, state: Path) -> Path:
    """The output directory a run's files hang off: `path` when it is one, else the folder of its state
    file, one up when that is a checkpoint-N (TRL's checkpoints sit inside the output directory)."""
    if path.is_dir():
        return path
    folder = state.parent
    return folder.parent if _CHECKPOINT.match(folder.name) else folder


def completion_files(root: Path) -> list[Path]:
    """TRL's completions tables (`log_completions=True`) in the run directory, in name order."""
    folder = root / "completions"
    return sorted(p for p in folder.glob("completions_*.parquet") if p.is_file()) if folder.is_dir() else []


def find_step_records(root: Path, alone: bool = False) -> tuple[Path, ...]:
    """Every step record in the run directory's record folders, in name order (each read later, one at a time).
    `alone` (a directory of records and nothing else): with none in those folders, the directory's own records, so
    `records/` itself opens as well as the folder above it."""
    found: list[Path] = []
    for name in RECORD_DIRS:
        folder = root / name
        if folder.is_dir():
            found.extend(sorted(p for p in folder.glob(RECORD_GLOB) if p.is_file()))
    if alone and not found and root.is_dir():
        found.extend(sorted(p for p in root.glob(RECORD_GLOB) if p.is_file()))
    return tuple(found)


def nothing_to_open(path: Path) -> str:
    """Why a directory is no run: everything a run is opened from, and where each was looked for."""
    return (f"{path}: nothing here opens as a run. Looked for: {STATE} here or in a checkpoint-N/ folder (TRL); "
            "a UNIPO canonical file (*.json here with header and entries at the top); step records "
            f"({RECORD_GLOB} in {', '.join(f'{d}/' for d in RECORD_DIRS)} or here); per-token files (prime-rl's "
            "token_exports/step_N/rank_R.jsonl, slime's train_data/N.pt or train_data/N_RANK.pt); slime's rollout "
            "dumps (rollout_data/N.pt); TRL's completions/completions_N.parquet; "
            "verl's rollout dumps (N.jsonl in rollout_data_dir/, rollout_data/ or rollouts/)")
