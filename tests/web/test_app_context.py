"""Two apps side by side in one process, with different kinds, share nothing (app/web/context.py): each
has its own job client, compute limiter, run-start buckets, words for nodes, templates and static
files, and serves its own walkthrough pages; configuring one leaves the other as it was."""
from __future__ import annotations

import html

import pytest
from fastapi.testclient import TestClient

from app.domain.snapshot import load_snapshot
from app.house import create_app
from app.kinds.tiny_lm.web.kind import KIND as TINY_LM
from app.kinds.toy.web.kind import KIND as TOY
from app.views.meaning import described_by, node_meaning
from app.web.settings import PROJECT_ROOT, Settings

TOY_STEP = "/walkthroughs/toy_grpo/steps/clip"
TINY_STEP = "/walkthroughs/tiny_lm_grpo/steps/sample"


@pytest.fixture
def apps(tmp_path):
    toy = create_app(Settings(device="cpu", data_dir=tmp_path / "a", compute_slots=1, compute_queue=0,
                              response_cache_mb=0), kinds=(TOY,))
    tiny = create_app(Settings(device="cpu", data_dir=tmp_path / "b", compute_slots=2, compute_queue=4,
                               response_cache_mb=0), kinds=(TINY_LM,))
    yield toy, tiny
    for app in (toy, tiny):
        app.state.compute.shutdown()


def test_two_apps_hold_distinct_state(apps):
    toy, tiny = (app.state.context for app in apps)
    for name in ("jobs", "limiter", "starts", "templates", "static"):
        assert getattr(toy, name) is not getattr(tiny, name), name
    assert toy.jobs.store is not tiny.jobs.store
    assert set(toy.jobs.tasks) == {t.name for t in TOY.tasks}
    assert set(tiny.jobs.tasks) == {t.name for t in TINY_LM.tasks}
    assert toy.describers == (TOY.describe,) and tiny.describers == (TINY_LM.describe,)
    shared = str(PROJECT_ROOT / "templates")
    assert toy.templates.env.loader.searchpath == [shared, str(TOY.templates)]
    assert tiny.templates.env.loader.searchpath == [shared, str(TINY_LM.templates)]
    assert toy.static.version("toy/toy.css") is not None and tiny.static.version("toy/toy.css") is None
    assert toy.static.version("css/app.css") == tiny.static.version("css/app.css")  # the shared files alike


def test_configuring_one_apps_limiter_and_jobs_leaves_the_others(apps):
    toy, tiny = (app.state.context for app in apps)
    assert (toy.limiter.slots, toy.limiter.max_waiting) == (1, 0)
    assert (tiny.limiter.slots, tiny.limiter.max_waiting) == (2, 4)
    toy.limiter.configure(3, 9)
    toy.jobs.mode = "off"
    assert (tiny.limiter.slots, tiny.limiter.max_waiting) == (2, 4)
    assert tiny.jobs.mode == "thread"
    toy.limiter.configure(1, 0)


def test_a_slot_held_in_one_app_refuses_nothing_in_the_other(apps):
    toy_app, tiny_app = apps
    client = TestClient(toy_app)
    with tiny_app.state.context.limiter:  # the other app's one slot: this app's are free
        assert client.get("/api/walkthroughs/toy_grpo/tensors?seed=4411").status_code == 200
    with toy_app.state.context.limiter:  # its own one slot, no waiting line: refused at once
        assert client.get("/api/walkthroughs/toy_grpo/tensors?seed=4412").status_code == 503


def test_each_app_serves_its_own_kind_in_its_own_words(apps):
    toy_app, tiny_app = apps
    toy, tiny = TestClient(toy_app), TestClient(tiny_app)
    runnable = {app: {w["id"]: w["runnable"] for w in c.get("/api/walkthroughs").json()}
                for app, c in (("toy", toy), ("tiny", tiny))}
    assert runnable["toy"]["toy_grpo"] and not runnable["toy"]["tiny_lm_grpo"]
    assert runnable["tiny"]["tiny_lm_grpo"] and not runnable["tiny"]["toy_grpo"]
    assert tiny.post("/api/walkthroughs/toy_grpo/tensors").status_code in (404, 405, 409)

    snapshot = load_snapshot(PROJECT_ROOT / "walkthroughs" / "toy_grpo.tensorviz.json")
    with described_by((TOY.describe,)):
        toy_words = node_meaning(snapshot, "ratio").summary
    with described_by(()):
        generic = node_meaning(snapshot, "ratio").summary
    assert toy_words != generic
    with described_by(()):  # whatever the test binds, each app's pages read its own kinds' words
        page = toy.get(f"{TOY_STEP}?node=ratio")
        assert page.status_code == 200 and html.escape(toy_words, quote=False) in page.text
        assert "/static/toy/toy.css?v=" in page.text
        lm_page = tiny.get(TINY_STEP)
        assert lm_page.status_code == 200 and "/static/toy/" not in lm_page.text
        view_only = tiny.get(f"{TOY_STEP}?node=ratio")  # the toy's graph, view-only in the tiny LM's app
        assert view_only.status_code == 200 and html.escape(toy_words, quote=False) not in view_only.text
