"""JSON bodies of the training-path API: their models (what OpenAPI documents) and builders.

The builders make the bodies from the engine's runs; the routes send those dicts.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Literal

from pydantic import Field

from app.kinds.toy.domain.process_spec import Process, ProcessCatalog, Stage
from app.kinds.toy.domain.rewards import DESCRIPTIONS, role_rewards
from app.kinds.toy.engine.processes import METRICS_NOTE, ProcessRun, StageRun
from app.web.schemas.base import Body

# -- models ----------------------------------------------------------------------------

class PaperRef(Body):
    """What the DeepSeek-R1 paper says about a stage."""

    fact: str = Field(description="The paper's account of the stage.")
    section: str = Field(description="Where in the paper, e.g. §2.3.1.")


class RoleRewards(Body):
    """A stage's reward rule applied to each kind of choice."""

    correct: float = Field(description="Reward of the readable correct answer.")
    mixed: float = Field(description="Reward of the right answer with mixed-language reasoning.")
    unformatted: float = Field(description="Reward of the answer that ignores the template.")
    wrong: float = Field(description="Reward of the well-formatted wrong answer.")


class StageItem(Body):
    """One stage of a training path, as defined."""

    id: str = Field(description="The stage id (the `stage` parameter).")
    kind: Literal["sft", "grpo", "rejection_sampling", "distill_sft"] = Field(
        description="sft, grpo, rejection_sampling or distill_sft.")
    title: str = Field(description="The stage's title.")
    start: str = Field(description="The checkpoint it starts from.")
    reference: str = Field(description="The checkpoint π_ref is frozen at.")
    output: str = Field(description="The checkpoint it produces.")
    reward: list[str] = Field(description="Its reward components (see `reward_components`); [] for SFT.")
    reward_by_role: RoleRewards | None = Field(description="The reward each kind of choice gets; null without "
                                                           "a reward rule.")
    data: str | None = Field(description="The dataset an SFT stage trains on; null for other stages.")
    iterations: int = Field(description="Training iterations (0 for rejection sampling).")
    samples_per_prompt: int | None = Field(description="Samples drawn per prompt by rejection sampling; null "
                                                       "for other stages.")
    paper: PaperRef
    toy_analogue: str = Field(description="What the toy does in its place.")


class ProcessItem(Body):
    """One training path, as defined."""

    id: str = Field(description="The path's id: r1-zero, r1 or distillation.")
    title: str = Field(description="The path's title.")
    summary: str = Field(description="The path in one sentence.")
    paper_section: str = Field(description="Where the paper describes it.")
    paper_result: str = Field(description="The paper's headline result for it.")
    has_rl: bool = Field(description="True when one of its stages is GRPO.")
    stages: list[StageItem] = Field(description="Its stages, in order.")


class ProcessesBody(Body):
    """The training paths (GET /api/processes)."""

    processes: list[ProcessItem] = Field(description="Every training path.")
    reward_components: dict[str, str] = Field(description="Per reward component (accuracy, format, …): "
                                                          "what it pays for.")


class Metrics(Body):
    """How good a policy is on the six toy prompts."""

    eval_reward: float = Field(description="Expected accuracy + format + language reward (max 2).")
    accuracy: float = Field(description="Share of prompts whose most likely choice has the right answer.")
    p_correct: float = Field(description="Mean probability of the readable correct choice.")
    p_mixed: float = Field(description="Mean probability of the right answer in mixed language.")
    divergence: float = Field(description="Mean exact KL(π || π_ref) over the prompts.")


class CurvePoint(Metrics):
    """The metrics after one training iteration."""

    iteration: int = Field(description="The iteration, from 1.")
    loss: float | None = Field(description="Training loss of the update made at this iteration.")
    train_reward: float | None = Field(description="Mean sampled reward of the groups; null outside GRPO.")


class StageRunItem(StageItem):
    """One stage of a run: its definition, then what training did."""

    start_metrics: Metrics = Field(description="Metrics of the checkpoint it starts from.")
    end_metrics: Metrics = Field(description="Metrics of the checkpoint it produces.")
    curve: list[CurvePoint] = Field(description="Metrics after each iteration; [] for rejection sampling.")
    dataset_size: int = Field(description="(prompt, choice) pairs it kept (rejection sampling) or trained on.")
    sampled: int = Field(description="Samples drawn by rejection sampling; 0 for other stages.")


class ProcessRunBody(ProcessItem):
    """A training path run end to end (GET /api/processes/{id})."""

    seed: int = Field(description="The seed of every sampling step.")
    final: Metrics = Field(description="Metrics of the path's final checkpoint.")
    stages: list[StageRunItem] = Field(description="Its stages, in order, with their runs.")


class ComparedProcess(Body):
    """One path's end result in a comparison."""

    id: str = Field(description="The path's id.")
    title: str = Field(description="The path's title.")
    paper_result: str = Field(description="The paper's headline result for it.")
    final: Metrics = Field(description="Metrics of its final checkpoint.")


class ComparisonBody(Body):
    """Every training path run with one seed, end results side by side (GET /api/processes/compare)."""

    seed: int | None = Field(description="The seed of every run; null when there are no paths.")
    metrics_note: str = Field(description="What each metric means.")
    processes: list[ComparedProcess] = Field(description="One entry per path.")


# -- builders --------------------------------------------------------------------------


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
            "metrics_note": METRICS_NOTE,
            "processes": [{"id": r.process_id, "title": catalog.get(r.process_id).title,
                           "paper_result": catalog.get(r.process_id).paper_result,
                           "final": asdict(r.final)} for r in runs]}
