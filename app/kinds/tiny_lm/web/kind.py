"""The tiny-LM kind (TinyLMGRPO: completions of tokens), as the house registers it."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request

from app.domain.catalog import CatalogEntry, Featured
from app.domain.training_paths import PATH_IDS
from app.engine.jobs.tasks import Job, JobTask
from app.kinds.tiny_lm import base_model
from app.kinds.tiny_lm.domain.kind_id import KIND_ID
from app.kinds.tiny_lm.engine import export_target, path_tasks
from app.kinds.tiny_lm.engine.step_inputs import path_jobs
from app.kinds.tiny_lm.engine.token_node_map import is_token_runnable
from app.kinds.tiny_lm.views.meaning import describe_tiny_lm
from app.kinds.tiny_lm.views.story import STORIES
from app.kinds.tiny_lm.web import api, pages
from app.views.urls import STEP_API
from app.web.conventions_query import conventions_from
from app.web.kind import FIRST_PATH, LONG_PATHS, DefaultRun, Kind, KindRoute, Moved

PATH_TASK = JobTask(KIND_ID, path_tasks.LmPathJob, path_tasks.run_task, path_tasks.TYPES,
                    path_tasks.payload, path_tasks.title, lane="long")
DEFAULT_SEED = 3  # the seed the page's paths box starts from


def path_job(request: Request, entry: CatalogEntry, path: str, query: Mapping[str, Any]) -> Job:
    """A path's job: `seed`, `scale` (every stage's steps multiplied; 1 is the walkthrough's run) and the
    conventions of its GRPO stages (`preset` and overrides; none: DeepSeekMath's with R1's β)."""
    if query.get("iterations_scale") is not None:
        raise ValueError("iterations_scale: the toy's parameter; the tiny LM's paths take `scale`")
    scale = 1.0 if query.get("scale") is None else float(query["scale"])
    low, high = path_tasks.SCALE_RANGE
    if not low <= scale <= high:
        raise ValueError(f"scale: {scale:g} is outside [{low}, {high}]")
    seed = DEFAULT_SEED if query.get("seed") is None else int(query["seed"])
    conventions = conventions_from(query.get("conventions") or {}, path_tasks.DEFAULT_CONVENTIONS)
    return path_tasks.path_job(path, seed, request.app.state.device, scale, conventions)


def default_runs(app: FastAPI) -> list[DefaultRun]:
    """Every path the box offers at its default seed (R1-Zero with its Dr. GRPO twin), on the server's device:
    the first the box shows (R1-Zero) before the real model's step, the others after it."""
    return [DefaultRun(job, FIRST_PATH if p == PATH_IDS[0] else LONG_PATHS)
            for p in PATH_IDS for job in path_jobs(p, DEFAULT_SEED, app.state.device, overlay=False)]


FEATURED = Featured(
    "tiny_lm_grpo", "GRPO on real text, token by token",
    "A tiny transformer answering additions in two scripts: completions of different lengths, padding masks, "
    "per-token ratios, clips and KL, R1's accuracy, format and language rewards, how the aggregation over tokens "
    "biases by length, and attention maps.",
    rank=1, points=tuple((step, story.point) for step, story in STORIES.items()))

KIND = Kind(id=KIND_ID, title="A tiny language model: completions of tokens",
            matches=is_token_runnable, step_page=pages.step_page,
            templates=Path(__file__).resolve().parents[1] / "templates", describe=describe_tiny_lm,
            tasks=(PATH_TASK,), path_job=path_job, default_runs=default_runs, featured=(FEATURED,),
            export_targets=export_target.TARGETS, commands={"base-model": base_model.command},
            step_api=(KindRoute(api.get_tokens, responses=api.TOKENS_RESPONSES),),
            paths_panel=(KindRoute(pages.path_fragment, strict=False),
                         KindRoute(pages.start_path, ("POST",), strict=False)),
            moved=(Moved("/api/walkthroughs/{walkthrough_id}/tokens", STEP_API),))
