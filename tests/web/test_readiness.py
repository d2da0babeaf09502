"""/readyz and the warm-up (app/web/warm_up.py, issue 47): /healthz says the process lives from the start,
/readyz says it serves its first pages at warm speed: 503 with Retry-After and its stage while warming, 200
after; with WARM_UP off it is ready at once. The warm-up draws every step of every featured walkthrough
(each worker's caches) and requests them and the house's pages through the app (its response cache), so the
first request of each is a replay."""
from __future__ import annotations

import time

from fastapi.testclient import TestClient

from app.house import create_app
from app.views.urls import URLS
from app.web.schemas.health import ReadyBody
from app.web.settings import Settings
from app.web.warm_up import HOUSE_PAGES, Readiness, featured_steps, warm_worker


def settings(tmp_path, warm_up: bool) -> Settings:
    return Settings(device="cpu", data_dir=tmp_path / "data", warm_up=warm_up, default_runs=False)


def test_without_warm_up_the_server_is_ready_at_once(tmp_path):
    with TestClient(create_app(settings(tmp_path, False))) as client:
        r = client.get("/readyz")
        assert r.status_code == 200 and r.json() == {"ready": True, "warm_up": "off"}
        assert r.headers["cache-control"] == "no-store"


def test_a_warming_server_is_not_ready_and_says_where_it_stands(tmp_path):
    app = create_app(settings(tmp_path, False))
    app.state.readiness = Readiness(enabled=True, stage="compute workers warming")
    client = TestClient(app)
    r = client.get("/readyz")
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert r.json()["ready"] is False and r.json()["stage"] == "compute workers warming"
    assert ReadyBody.model_validate(r.json()).pages == 0  # the document's body, key for key
    assert client.get("/healthz").status_code == 200  # alive all along


def test_the_warm_up_draws_every_featured_step_then_says_ready(tmp_path):
    app = create_app(settings(tmp_path, True))
    steps = featured_steps(app)
    ids = [w for w, _ in steps]
    assert ids[0] == app.state.catalog.default_id and len(set(ids)) == len(app.state.catalog.featured)
    assert len(steps) == sum(len(app.state.catalog.snapshot(w).steps) for w in set(ids))
    with TestClient(app) as client:
        deadline = time.monotonic() + 120
        while (r := client.get("/readyz")).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        body = r.json()
        ReadyBody.model_validate(body)
        assert r.status_code == 200 and body["ready"] is True and body["stage"] == "ready"
        assert body["pages"] == len(HOUSE_PAGES) + len(steps) and body["failed"] == 0
        # each was kept by the response cache as a browser asks (gzip), so its first request is a replay;
        # but a page drawn from state that changes (a run not started or in progress says no-store)
        cache = next(m for m in _middleware(app) if type(m).__name__ == "ResponseCacheMiddleware")
        kept = {key[0] for key in cache._entries if key[2]}
        assert {"/", "/walkthroughs/new"} <= kept  # the list is drawn per request (not a cached path)
        for url in (URLS.step(w, s) for w, s in steps):
            changes = "no-store" in client.get(url).headers["cache-control"]
            assert (url in kept) != changes, url
        assert URLS.step(*steps[0]) in kept


def test_a_worker_warms_by_drawing_each_featured_step_as_its_page_would(tmp_path):
    app = create_app(settings(tmp_path, False))
    drawn, failed, seconds = warm_worker(app)
    assert (drawn, failed) == (len(featured_steps(app)), 0) and seconds > 0


def _middleware(app):
    stack = app.middleware_stack or app.build_middleware_stack()
    while stack is not None:
        yield stack
        stack = getattr(stack, "app", None)
