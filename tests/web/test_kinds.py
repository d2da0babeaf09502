"""The kind registry (app/house.py): the kind is data on each catalog entry, the API
and the page agree on it, every kind's cache misses share one compute limit, the tiny LM's
inspector writes the conventions in force, and a kind registered only in a test is served by the
shared step route without touching either kind's files."""
from __future__ import annotations

import asyncio
import pathlib

import httpx
import pytest
from bs4 import BeautifulSoup
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from live_server import running_server
from reporting import report
from run_async import run_async

from app.domain.snapshot import Snapshot
from app.house import KINDS, create_app, registry
from app.web.kind import Kind, StepRequest
from app.web.settings import Settings

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY = ROOT / "walkthroughs" / "tiny_lm_grpo.tensorviz.json"
TOY = ROOT / "walkthroughs" / "toy_grpo.tensorviz.json"


def test_each_shipped_file_carries_its_kind(make_client):
    client = make_client()
    cat = client.app.state.catalog
    assert {e.id: e.kind for e in cat.entries()} == {"toy_grpo": "toy", "tiny_lm_grpo": "tiny_lm",
                                                     "smollm_grpo": "smollm"}
    listed = {w["id"]: w["runnable"] for w in client.get("/api/walkthroughs").json()}
    assert listed == {"toy_grpo": True, "tiny_lm_grpo": True, "smollm_grpo": True}


@pytest.mark.parametrize("path, kind", [(TINY, "tiny_lm"), (TOY, "toy")])
def test_an_uploaded_export_is_runnable_as_its_kind_and_its_page_runs(make_client, path, kind):
    client = make_client()
    answer = client.post("/api/walkthroughs", files={"file": (path.name, path.read_bytes(), "application/json")})
    assert answer.status_code in (200, 201)
    body = answer.json()
    assert body["runnable"] is True  # issue 19: the tiny LM's export answered false
    assert client.app.state.catalog.get(body["id"]).kind == kind
    page = client.get(body["url"])
    assert page.status_code == 200
    soup = BeautifulSoup(page.text, "html.parser")
    if kind == "tiny_lm":  # the token engine ran: its panel and its tokens are on the page
        assert soup.select_one("#token-panel") is not None and soup.select("#token-panel [data-value]")
    else:
        assert soup.select_one("#param-form") is not None


def test_tiny_lm_formula_names_the_dual_clip_under_verl(make_client):
    client = make_client()
    url = "/walkthroughs/tiny_lm_grpo/steps/ratio?node=clipped"
    plain = BeautifulSoup(client.get(url).text, "html.parser").select_one("#inspector .formula code").text
    verl = BeautifulSoup(client.get(url + "&preset=verl").text, "html.parser").select_one("#inspector .formula code").text
    assert "dual clip" not in plain and plain.startswith("L_i,t = min(ρ_i,t·A_i")
    assert "floored at 3·A_i where A_i < 0 (dual clip)" in verl and verl.startswith("L_i,t = min(ρ_i,t·A_i")
    ratio = BeautifulSoup(client.get("/walkthroughs/tiny_lm_grpo/steps/ratio?node=ratio&preset=verl").text,
                          "html.parser").select_one("#inspector .formula code").text
    assert ratio == "ρ_i,t = exp(clamp(log π_θ(o_i,t) − log π_old(o_i,t), ±20))"


# -- a throwaway kind, registered in this test only -----------------------------------------

def _is_toy_shaped(snapshot: Snapshot) -> bool:
    return "sub@ToyGRPO#0" in snapshot.node_ids


def _throwaway_page(asked: StepRequest):
    return PlainTextResponse(f"throwaway kind: {asked.walkthrough_id} step {asked.step_id} "
                             f"({len(asked.snapshot.nodes)} nodes, {asked.device})")


def _install(app: FastAPI) -> None:
    @app.get("/api/throwaway")
    def ping() -> dict:
        return {"kind": "throwaway"}


THROWAWAY = Kind(id="throwaway", title="A kind from a test", matches=_is_toy_shaped,
                 step_page=_throwaway_page, install=_install)


def test_a_kind_registered_in_a_test_is_served_by_the_shared_step_route(tmp_path):
    from fastapi.testclient import TestClient
    client = TestClient(create_app(Settings(device="cpu", uploads_dir=tmp_path), kinds=(THROWAWAY,)))
    assert client.app.state.catalog.get("toy_grpo").kind == "throwaway"
    assert client.app.state.catalog.get("tiny_lm_grpo").kind is None  # no kind of this app runs it
    page = client.get("/walkthroughs/toy_grpo/steps/clip")
    assert page.status_code == 200 and page.text.startswith("throwaway kind: toy_grpo step clip (18 nodes, cpu)")
    assert client.get("/api/throwaway").json() == {"kind": "throwaway"}
    # the toy's own routes are not there: they come with its kind
    assert client.get("/api/walkthroughs/toy_grpo/step").status_code == 404
    view_only = client.get("/walkthroughs/tiny_lm_grpo/steps/sample")
    assert view_only.status_code == 200
    assert "view-only" in BeautifulSoup(view_only.text, "html.parser").select_one("#inspector").text or \
        BeautifulSoup(view_only.text, "html.parser").select_one("#graph-stage") is not None
    assert {w["id"]: w["runnable"] for w in client.get("/api/walkthroughs").json()} == \
        {"toy_grpo": True, "tiny_lm_grpo": False, "smollm_grpo": False}


def test_the_registry_takes_the_first_match_and_refuses_two_kinds_of_one_id():
    reg = registry((THROWAWAY, *KINDS))
    from app.domain.snapshot import load_snapshot
    assert reg.classify(load_snapshot(TOY)) == "throwaway"
    assert registry(KINDS).classify(load_snapshot(TOY)) == "toy"
    with pytest.raises(ValueError, match="share an id"):
        registry((THROWAWAY, THROWAWAY))


# -- one compute limit for every kind ---------------------------------------------------------

@pytest.mark.slow
def test_concurrent_distinct_tiny_lm_requests_get_prompt_503s_beyond_the_slots(tmp_path, request):
    """64 distinct tiny-LM parameter sets at once: each miss takes a compute slot (1 here, 2
    waiting), so beyond them the answer is a prompt 503 with Retry-After, as for the toy."""
    env = {"COMPUTE_SLOTS": "1", "COMPUTE_QUEUE": "2", "COMPUTE_WAIT_S": "1"}

    async def burst(base: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=base, timeout=120,
                                     limits=httpx.Limits(max_connections=64)) as client:
            return await asyncio.gather(*(client.get(f"/api/walkthroughs/tiny_lm_grpo/step?seed={1000 + i}")
                                          for i in range(64)))

    with running_server(tmp_path, env=env) as server:
        answers = run_async(burst(server.url))  # Playwright's loop may be running (tests/run_async.py)
    statuses = [a.status_code for a in answers]
    slowest = max(a.elapsed.total_seconds() for a in answers if a.status_code == 503) if 503 in statuses else 0
    report(request, f"tiny-LM burst: 64 distinct seeds, 1 slot + 2 waiting: {statuses.count(200)} computed, "
                    f"{statuses.count(503)} refused (slowest refusal {slowest:.2f} s)")
    assert set(statuses) <= {200, 503}, statuses
    busy = [a for a in answers if a.status_code == 503]
    assert len(busy) >= 32, f"{statuses.count(200)} computed, {len(busy)} refused"  # 1 slot + 2 waiting
    assert all(a.headers.get("retry-after") == "1" for a in busy)
    assert statuses.count(200) >= 1


# -- one training-path concept ---------------------------------------------------------------

def test_both_kinds_name_the_paths_alike():
    from app.domain.training_paths import PATH_IDS
    from app.kinds.tiny_lm.engine.lm_plans import PLANS
    from app.kinds.toy.domain.process_spec import load_processes
    toy = load_processes(ROOT / "walkthroughs" / "processes.toml")
    assert tuple(toy.ids) == PATH_IDS == tuple(PLANS) == ("r1-zero", "r1", "distillation")


def test_old_tiny_lm_path_links_redirect_to_the_shared_id_and_key(make_client):
    client = make_client(follow_redirects=False)
    page = client.get("/walkthroughs/tiny_lm_grpo/steps/sample?seed=1&path=r1_zero")
    assert page.status_code == 303
    assert page.headers["location"] == "/walkthroughs/tiny_lm_grpo/steps/sample?seed=1&process=r1-zero"
    box = client.get("/walkthroughs/tiny_lm_grpo/paths/r1_zero?seed=1")
    assert box.status_code == 303 and box.headers["location"] == "/walkthroughs/tiny_lm_grpo/paths/r1-zero?seed=1"
    assert client.get("/walkthroughs/tiny_lm_grpo/steps/sample?process=ppo").status_code == 404
    assert client.get("/walkthroughs/toy_grpo/paths/r1-zero").status_code == 404  # the toy has no such box
