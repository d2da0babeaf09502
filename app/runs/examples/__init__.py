"""The runs' shipped example (issue 34): a real TRL 1.16 GRPOTrainer run on CPU (120 steps of a tiny Llama,
beta 0.04, num_iterations 1), its trainer_state.json as TRL wrote it and the recorder's step records of every
30th step; written by peers/write_example_run.py (.venv-peers/bin/python -m peers.write_example_run)."""
from __future__ import annotations

from pathlib import Path

RUN_DIR = Path(__file__).resolve().parent / "trl-1.16-run"
RUN_EXAMPLE = RUN_DIR / "trainer_state.json"
