"""JSON shapes of the process API (no web framework here)."""
from __future__ import annotations

from dataclasses import asdict

from .engine.processes import ProcessRun, StageRun
from .engine.rewards import DESCRIPTIONS, role_rewards
from .process_spec import Process, ProcessCatalog, Stage


def stage_item(stage: Stage) -> dict:
    return {"id": stage.id, "kind": stage.kind, "title": stage.title, "start": stage.start,
            "reference": stage.reference, "output": stage.output, "reward": list(stage.reward),
            "reward_by_role": role_rewards(stage.reward) if stage.reward else None,
            "data": stage.data,
            "iterations": stage.iterations if stage.kind != "rejection_sampling" else 0,
            "samples_per_prompt": stage.samples_per_prompt if stage.kind == "rejection_sampling" else None,
            "paper": {"fact": stage.paper, "section": stage.paper_section},
            "toy_analogue": stage.toy}


def process_item(process: Process) -> dict:
    return {"id": process.id, "title": process.title, "summary": process.summary,
            "paper_section": process.paper_section, "paper_result": process.paper_result,
            "has_rl": any(s.is_rl for s in process.stages),
            "stages": [stage_item(s) for s in process.stages]}


def processes_payload(catalog: ProcessCatalog) -> dict:
    return {"processes": [process_item(p) for p in catalog.processes],
            "reward_components": DESCRIPTIONS}


def stage_run_payload(run: StageRun) -> dict:
    return {
        **stage_item(run.stage),
        "start_metrics": asdict(run.start_metrics),
        "end_metrics": asdict(run.end_metrics),
        "curve": [{"iteration": p.iteration, **asdict(p.metrics), "loss": p.loss, "train_reward": p.train_reward}
                  for p in run.curve],
        "dataset_size": len(run.dataset),
        "sampled": run.sampled,
    }


def process_run_payload(catalog: ProcessCatalog, run: ProcessRun) -> dict:
    return {**process_item(catalog.get(run.process_id)), "seed": run.seed,
            "final": asdict(run.final), "stages": [stage_run_payload(s) for s in run.stages]}


def comparison_payload(catalog: ProcessCatalog, runs: list[ProcessRun]) -> dict:
    return {"seed": runs[0].seed if runs else None,
            "metrics_note": "eval_reward: expected accuracy + format + language reward (max 2); "
                            "accuracy: share of the six prompts whose most likely choice is right; "
                            "divergence: mean KL(final || base checkpoint) (the student: || its own base)",
            "processes": [{"id": r.process_id, "title": catalog.get(r.process_id).title,
                           "paper_result": catalog.get(r.process_id).paper_result,
                           "final": asdict(r.final)} for r in runs]}
