"""The real model's default step while the server's start-up runs go before it (issue 47): its page says it is
the server's own run and how many runs are ahead, and offers to compute it first: that POST makes the run the
visitor's, which a lane runner takes at once, ahead of every start-up run."""
from __future__ import annotations

from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from runs import jobs_of

from app.house import create_app
from app.stores.jobs import SERVER
from app.web.jobs.start import queue_default_runs
from app.web.settings import Settings

PAGE = "/walkthroughs/smollm_grpo/steps/sample"


def text(html: str) -> str:
    return " ".join(BeautifulSoup(html, "html.parser").get_text(" ").split())


def test_a_queued_default_step_says_where_it_stands_and_can_go_first(tmp_path):
    app = create_app(Settings(device="cpu", data_dir=tmp_path / "data", job_runner="off", default_runs=False))
    client = TestClient(app)
    queue_default_runs(app.state.context.jobs, (run for kind in app.state.kinds.kinds if kind.default_runs is not None
                       for run in kind.default_runs(app)))  # no runner here: they stay queued
    (step,) = [job for job in jobs_of(client).store.listing() if job.kind == "smollm"]
    ahead = sum(1 for job in jobs_of(client).store.listing() if job.created_at < step.created_at)
    assert ahead == 8  # the toy's six paths, the tiny LM's R1-Zero and its Dr. GRPO twin
    page = client.get(PAGE)
    assert page.status_code == 200 and "no-store" in page.headers["cache-control"]
    said = text(page.text)
    assert "the server computes its default runs itself, one at a time" in said
    assert f"{ahead} runs are ahead of this step" in said
    form = BeautifulSoup(page.text, "html.parser").select_one("form:has(#smol-first)")
    assert form["method"] == "post" and form["action"] == PAGE

    moved = client.post(form["action"], follow_redirects=False)
    assert moved.status_code == 303 and moved.headers["location"] == PAGE
    assert jobs_of(client).store.get(step.id).client not in ("", SERVER)  # the visitor's now: a lane takes it first
    said = text(client.get(PAGE).text)
    assert "one run of this model at a time" in said and "Compute it first" not in said
    assert "ahead of it" not in said  # nothing of its lane goes before it
