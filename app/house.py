"""The house: the one module that names the walkthrough kinds (and the runs, their sibling), and the app built
from them.

Adding a kind is a folder under app/kinds/ and one line in KINDS (docs/design.md, "How to add a
kind"). Every other layer (web, views, engine, domain) is shared and names no kind; the kinds build
on them, and this module sits on top of both. Importing it changes nothing global: an app takes
its kinds' templates, static files and words for nodes when it is created.

Order matters: the first kind whose engine matches a snapshot runs it (datasette's firstresult
hooks); a snapshot none matches is view-only. A test may build an app with kinds of its own
(`create_app(settings, kinds=...)`), so a throwaway kind needs no line here.
"""
from __future__ import annotations

from collections.abc import Sequence

from fastapi import FastAPI

from app.kinds.smollm.web.kind import KIND as SMOLLM
from app.kinds.step_record.web.kind import KIND as STEP_RECORD
from app.kinds.tiny_lm.web.kind import KIND as TINY_LM
from app.kinds.toy.web.kind import KIND as TOY
from app.runs.manifest import RUNS
from app.web import factory
from app.web.kind import Kind, KindRegistry
from app.web.settings import Settings

# The step record first: its words for nodes answer only for its own graph (the recorded-policy
# marker), but that graph shares the GRPO head's templates with the toy's and the tiny LM's, whose
# words ("Prompt features x") would otherwise take its nodes. Then the tiny LM: its words are more
# specific than the toy's. The engines' matchers are exact (a record's never matches), so their
# order does not matter.
# The real model before the toy for the same reason: its head is the tiny LM's token-level one (ModuleTemplates
# PolicyRatio, ClippedSurrogate, ...), which the toy's words describe per answer ("each sampled answer",
# ρ_i) while here ρ is per token; its words answer only for its own graph (the ScoredDecoder marker).
# The runs (app/runs) are a sibling of the kinds under the same manifest: they run no snapshot, so their place
# only orders their upload help (after the step record's) and their stylesheet.
KINDS: tuple[Kind, ...] = (STEP_RECORD, TINY_LM, SMOLLM, TOY, RUNS)


def registry(kinds: Sequence[Kind] = KINDS) -> KindRegistry:
    return KindRegistry(tuple(kinds))


def configure_worker(settings: Settings) -> None:
    """A compute worker process's set-up (imported by name in a spawned process)."""
    factory.configure_process(settings)


def worker_app(settings: Settings) -> FastAPI:
    """A compute worker process's app, with the registry's kinds."""
    return factory.worker_app(settings, registry())


def create_app(settings: Settings | None = None, kinds: Sequence[Kind] = KINDS) -> FastAPI:
    """The app serving `kinds` (the registry's unless a test brings its own). Only the registry's
    kinds compute in worker processes: a test's own are functions a spawned process cannot import."""
    workers = (configure_worker, worker_app) if tuple(kinds) == KINDS else None
    return factory.build_app(settings or Settings(), registry(kinds), workers)
