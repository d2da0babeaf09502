"""The real-model kind (SmolLM2-135M-Instruct under one live GRPO step), as the house registers it."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request

from app.domain.catalog import CatalogEntry, Featured
from app.engine.jobs.tasks import Job, JobTask, Progress
from app.kinds.smollm.domain.kind_id import KIND_ID
from app.kinds.smollm.engine import checkpoint, export_target, own_models, run_task, step_task
from app.kinds.smollm.engine.node_map import is_smollm_runnable
from app.kinds.smollm.engine.params import SmolParams
from app.kinds.smollm.views.meaning import describe_smollm
from app.kinds.smollm.views.model_facts import ModelFacts
from app.kinds.smollm.views.story import STORIES, stories_for
from app.kinds.smollm.web import api, pages, paths
from app.kinds.smollm.web.model_choice import own_model, required_model
from app.kinds.smollm.web.models_command import models_command
from app.views.urls import PATHS_PANEL, STEP_API
from app.web.conventions_query import conventions_from
from app.web.kind import REAL_STEP, DefaultRun, Kind, KindRoute, Moved, WalkthroughFile
from app.web.settings import Settings


def _run(params: step_task.SmolStepJob, progress: Progress):
    # The runner process's settings are the server's (it is spawned with its environment): the
    # converted weights are cached in the same data directory.
    from app.web.settings import Settings
    return step_task.run_step(params, progress, Settings().resolved_data_dir)


# Its own lane: a step of tens of seconds never waits behind the tiny LM's paths, nor they behind it.
STEP_TASK = JobTask(KIND_ID, step_task.SmolStepJob, _run, step_task.TYPES, step_task.payload, step_task.title,
                    lane="real")


def _run_path(params: run_task.SmolPathJob, progress: Progress):
    from app.web.settings import Settings
    return run_task.run(params, progress, Settings().resolved_data_dir)


# The same lane as the steps: one runner, one copy of the weights; a step asked for during a run waits
# behind it (the page says how many runs are ahead).
RUN_TASK = JobTask(KIND_ID, run_task.SmolPathJob, _run_path, run_task.TYPES, run_task.payload, run_task.title,
                   lane="real")


def path_job(request: Request, entry: CatalogEntry, path: str, query: Mapping[str, Any]) -> Job:
    """The paths API's run: R1-Zero only (R1 and distillation: KeyError, a 404), `seed`, `scale` (× 20 steps)
    and the conventions (`preset` and overrides)."""
    if query.get("iterations_scale") is not None:
        raise ValueError("iterations_scale: the toy's parameter; this model's path takes `scale`")
    scale = 1.0 if query.get("scale") is None else float(query["scale"])
    low, high = run_task.SCALE_RANGE
    if not low <= scale <= high:
        raise ValueError(f"scale: {scale:g} is outside [{low}, {high}]")
    seed = paths.DEFAULT_SEED if query.get("seed") is None else int(query["seed"])
    given = query.get("conventions") or {}
    conventions = conventions_from(given) if given else None
    model = required_model(request, entry.id)
    return run_task.path_job(path, run_task.run_params(seed, scale, conventions), request.app.state.device, model)


def step_jobs(request: Request, entry: CatalogEntry) -> list[Job]:
    """The one step a page's address names (its Run button's POST starts it); [] for a refused query."""
    q = pages.read_query(request.query_params)
    model = own_model(request, entry.id)
    if q.refused is not None or not checkpoint.runnable(model):
        return []
    return [step_task.step_job(q.params, request.app.state.device, model)]


def walkthrough_files(settings: Settings) -> list[WalkthroughFile]:
    """An added model's walkthrough each (GGUF_MODELS and `models add`'s), made where missing or stale, listed
    after SmolLM2's with its own words."""
    return [WalkthroughFile(path, own_featured(path.name.removesuffix(".tensorviz.json"), own_models.stamp_of(path)))
            for path in own_models.walkthrough_files(settings.resolved_data_dir, settings.gguf_models)]


def own_featured(walkthrough_id: str, stamp: dict[str, Any]) -> Featured:
    """An added model's place in the lists: what it is, where it came from, and what each step shows of it."""
    given = stamp["facts"]
    facts = ModelFacts(**{k: v for k, v in given.items() if k in ModelFacts.__dataclass_fields__})
    size = f", {facts.size_label} parameters" if facts.size_label else ""
    return Featured(
        walkthrough_id, f"GRPO on your model: {facts.name}",
        f"{facts.name} ({facts.family}, {facts.n_layer} blocks{size}; from {given['file']}) answers a prompt "
        f"eight times and one GRPO step runs on its own weights: the same six steps as SmolLM2's, where in its "
        f"{facts.n_layer} blocks the step pushes, what its {facts.n_head} attention heads do, and which tokens "
        "one update moved.",
        rank=3, points=tuple((step, story.point) for step, story in stories_for(facts).items()))


def default_runs(app: FastAPI) -> list[DefaultRun]:
    """The default step, computed once by the server at start-up (a first visitor finds it done, or its
    progress); none without the checkpoint."""
    if checkpoint.find_gguf() is None:
        return []
    return [DefaultRun(step_task.step_job(SmolParams(), app.state.device), REAL_STEP)]


FEATURED = Featured(
    "smollm_grpo", "GRPO on a real pretrained model: SmolLM2-135M-Instruct",
    "A 135M-parameter chat model (30 blocks) answers a prompt eight times; one GRPO step runs on the server, "
    "and every module's values and gradients are there to inspect: where in the 30 blocks the step pushes, "
    "what attention does, and which tokens one update moved.",
    rank=2, points=tuple((step, story.point) for step, story in STORIES.items()))

KIND = Kind(id=KIND_ID, title="A real pretrained model: SmolLM2-135M-Instruct",
            matches=is_smollm_runnable, step_page=pages.step_page,
            templates=Path(__file__).resolve().parents[1] / "templates", tasks=(STEP_TASK, RUN_TASK), path_job=path_job,
            static=Path(__file__).resolve().parents[1] / "static", stylesheets=("smollm.css",),
            describe=describe_smollm, step_jobs=step_jobs, waits_for_jobs=False, default_runs=default_runs,
            featured=(FEATURED,), walkthrough_files=walkthrough_files, commands={"models": models_command},
            export_targets=export_target.TARGETS,
            step_api=(KindRoute(api.get_step, responses=api.RESPONSES),
                      KindRoute(api.start_step, ("POST",), responses=api.POST_RESPONSES)),
            paths_panel=(KindRoute(paths.paths_panel, strict=False),
                         KindRoute(paths.start_run, ("POST",), strict=False)),
            routers=(pages.router,),  # the progress box of a step that runs for tens of seconds: this kind's alone
            moved=(Moved("/api/walkthroughs/{walkthrough_id}/smollm-step", STEP_API),
                   Moved("/walkthroughs/{walkthrough_id}/smollm-paths/{path}", PATHS_PANEL)))
