"""Runs for the compare tests (issue 50): TRL trainer_state.json documents (run_fixtures.py) written as run folders
with a recorded step whose record carries the trainer's config (the shipped example's step 30, its framework_config
changed), opened as `python -m app open RUN_DIR` opens them."""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from run_fixtures import entry, state

from app.runs.engine.run_opening import open_run_dir
from app.runs.examples import RUN_DIR

RECORD = json.loads((RUN_DIR / "records" / "step-30.grpo-step.json").read_text())
# what differs between the three runs: TRL's own names, as GRPOConfig has them
CONFIGS = ({"beta": 0.04, "epsilon": 0.2, "loss_type": "dapo"},
           {"beta": 0.0, "epsilon": 0.28, "loss_type": "dr_grpo"},
           {"beta": 0.1, "epsilon": 0.2, "loss_type": "grpo"})


def run_document(k: int, n: int = 40, *, tokens: bool = True, extra: dict | None = None, kl: bool = True) -> dict:
    """Run k's log: its kl k+1 times run 0's (none with `kl=False`: TRL logs kl only when β > 0), its num_tokens k+1
    times as many per step (a longer completion budget)."""
    entries = []
    for s in range(1, n + 1):
        e = entry(s, kl=0.01 * (k + 1) + 0.0001 * s, num_tokens=1000.0 * (k + 1) * s, **(extra or {}))
        if not tokens:
            e.pop("num_tokens")
        if not kl:
            e.pop("kl")
        entries.append(e)
    return state(entries)


def write_run(folder: Path, document: dict, config: dict | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trainer_state.json").write_text(json.dumps(document))
    if config is not None:
        record = json.loads(json.dumps(RECORD))
        record["framework_config"] |= config
        (folder / "step-records").mkdir(exist_ok=True)
        (folder / "step-records" / "step-30.grpo-step.json").write_text(json.dumps(record))
    return folder


def open_runs(app, root: Path, runs: list[tuple[dict, dict | None]]) -> list[str]:
    """Each (document, config) written and opened into the app's stores; their ids, in order."""
    ids = []
    for k, (document, config) in enumerate(runs):
        opened = open_run_dir(write_run(root / f"run-{k}", document, config), app.state.run_store,
                              app.state.catalog.uploads)
        ids.append(opened.id)
    return ids


def three_runs(app, root: Path) -> list[str]:
    """Three runs whose configs differ in beta, epsilon and loss_type; run B (β = 0) logs no kl, and alone logs
    rewards/format/mean."""
    return open_runs(app, root, [(run_document(0), CONFIGS[0]),
                                 (run_document(1, extra={"rewards/format/mean": 0.5}, kl=False), CONFIGS[1]),
                                 (run_document(2), CONFIGS[2])])


def zipped(folder: Path) -> bytes:
    """The run folder as the upload page's "Open a whole run" takes it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()
