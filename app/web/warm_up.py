"""Warm-up: what a newcomer's first pages cost is paid before the server says it is ready.

Measured on two cores (issue 47): the first walkthrough's first step took 5.9 s as the first request
after /healthz, the second's 2.3 s, though each takes 2-60 ms once warm. Nearly all of it is paid once
per process: a compute worker's start (torch imported), the kinds' modules imported, checkpoints
read, graphs laid out by `dot`, templates compiled, the default steps computed. So, at start-up:

1. each compute worker, once its app is built (app/web/compute_pool._init_worker), draws every
   step of every featured walkthrough once (`warm_worker`) and counts itself warm;
2. the web process, once every worker is (`WorkerPool.all_warm`), requests the same pages and its
   own (`/`, the list, the upload form) through its own app (`warm_web`), so its templates are
   compiled and its response cache holds them, as a browser asks (gzip);
3. then `Readiness` says ready: `/readyz` answers 200 and the URL is printed.

`/healthz` answers all along (the process lives); the warm-up never blocks serving: a request that
comes before it ends is served as it would have been without it. A page that fails to draw is logged
and left: warming is a speed-up, never a condition. WARM_UP=false skips it (ready at once).
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from app.views.urls import URLS

log = logging.getLogger("app")

# Headers of the warm requests: a browser's (gzip: the response cache keys on it), no htmx.
WARM_HEADERS = {"accept-encoding": "gzip, deflate, br", "accept": "text/html"}
# The web process's own pages, beside the featured walkthroughs' steps.
HOUSE_PAGES = ("/", "/walkthroughs", "/walkthroughs/new")
WORKERS_WAIT_S = 300.0  # past this the workers' warm-up is given up on (logged) and the server says ready


def featured_steps(app: Any) -> list[tuple[str, str]]:
    """(walkthrough id, step id) of every step of every featured walkthrough that loaded, by rank."""
    catalog = app.state.catalog
    steps = []
    for featured in sorted(catalog.featured, key=lambda f: f.rank):
        try:
            snapshot = catalog.snapshot(featured.walkthrough_id)
        except KeyError:  # not shipped, or failed to load: nothing to warm
            continue
        steps.extend((featured.walkthrough_id, step.id) for step in snapshot.steps)
    return steps


def _scope(url: str) -> dict:
    return {"type": "http", "method": "GET", "path": url, "raw_path": url.encode(), "query_string": b"",
            "headers": [(k.encode(), v.encode()) for k, v in WARM_HEADERS.items()], "root_path": "",
            "scheme": "http", "server": ("127.0.0.1", 80), "http_version": "1.1"}


def warm_worker(app: Any) -> tuple[int, int, float]:
    """In a compute worker: draw every featured step once, as a GET of its page would. (drawn, failed, seconds)."""
    from app.web.routes.pages import step_work  # the page's own function: the routes import this layer's peers

    began = time.perf_counter()
    drawn = failed = 0
    for walkthrough_id, step_id in featured_steps(app):
        try:
            step_work(app, _scope(URLS.step(walkthrough_id, step_id)), walkthrough_id, step_id)
            drawn += 1
        except Exception:  # a speed-up only: the page's own request will say what is wrong
            failed += 1
            log.warning("warm-up: %s/%s not drawn", walkthrough_id, step_id, exc_info=True)
    return drawn, failed, time.perf_counter() - began


@dataclass
class Readiness:
    """Whether this web process serves its first pages at warm speed yet (`/readyz`)."""
    enabled: bool
    began: float = field(default_factory=time.monotonic)
    ready_at: float | None = None
    stage: str = "starting"
    pages: int = 0
    failed: int = 0

    @property
    def ready(self) -> bool:
        return not self.enabled or self.ready_at is not None

    def body(self) -> dict[str, Any]:
        if not self.enabled:
            return {"ready": True, "warm_up": "off"}
        took = (self.ready_at or time.monotonic()) - self.began
        return {"ready": self.ready, "stage": "ready" if self.ready else self.stage, "seconds": round(took, 2),
                "pages": self.pages, "failed": self.failed}


async def warm_web(app: Any, readiness: Readiness, announce: str | None) -> None:
    """In the web process, from its lifespan: wait for the workers' warm-up, request the first pages
    through the app itself, then say ready (and print `announce`, the URL to open). A warm-up that
    fails is logged and the server says ready anyway: it serves as it would have without one."""
    try:
        await _wait_for_workers(app, readiness)
        await _request_first_pages(app, readiness)
    except Exception:
        log.exception("warm-up failed; serving without it")
    done = time.monotonic()
    log.info("warm-up: %d pages in %.1f s (%d failed)", readiness.pages, done - readiness.began, readiness.failed)
    if announce:  # said before /readyz says it, so whoever sees ready can read it
        print(f"{announce} (ready in {done - readiness.began:.1f} s)", flush=True)
    readiness.ready_at = done


async def _wait_for_workers(app: Any, readiness: Readiness) -> None:
    pool = getattr(app.state.compute, "pool", None)
    if pool is None:  # computing in threads of this process: the page requests warm it
        return
    readiness.stage = "compute workers warming"
    deadline = time.monotonic() + WORKERS_WAIT_S
    while not pool.all_warm() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    if not pool.all_warm():
        log.warning("warm-up: the compute workers were not warm after %.0f s; ready without them", WORKERS_WAIT_S)


async def _request_first_pages(app: Any, readiness: Readiness) -> None:
    import httpx

    readiness.stage = "first pages"
    urls = [*HOUSE_PAGES, *(URLS.step(w, s) for w, s in featured_steps(app))]
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 0))
    async with httpx.AsyncClient(transport=transport, base_url="http://warm-up", headers=WARM_HEADERS,
                                 timeout=120) as client:
        for url in urls:
            try:
                ok = (await client.get(url)).status_code < 500
            except Exception:
                log.warning("warm-up: GET %s failed", url, exc_info=True)
                ok = False
            readiness.pages += ok
            readiness.failed += not ok
