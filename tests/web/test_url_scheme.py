"""One URL scheme owned by the house (issue 51, app/web/routes/kind_routes.py).

- The step's JSON of every kind is `/api/walkthroughs/{id}/step`; a training path's box on the page is
  `/walkthroughs/{id}/paths/{path}`; the kinds give handlers (Kind.step_api, Kind.paths_panel), not routes.
- Every old address (Kind.moved) answers 308 to its new one, query kept, GET and POST alike, and the new one
  answers what the old one did.
- Every route the app serves is the house's or one a manifest names (Kind.routers): a kind adds no route
  any other way.
"""
from __future__ import annotations

import json

import pytest
from fastapi.routing import APIRoute
from record_factory import make_record
from starlette.routing import Mount, Route

from app.house import KINDS
from app.views.urls import PATHS_PANEL, STEP_API


@pytest.fixture(scope="module")
def client(make_client):
    return make_client(follow_redirects=False)


@pytest.fixture(scope="module")
def record_id(client) -> str:
    upload = client.post("/api/walkthroughs", files={"file": ("r.json", json.dumps(make_record()), "application/json")})
    assert upload.status_code in (200, 201), upload.text
    return upload.json()["id"]


MOVED = [  # (old, new): each kind's old address of its step's JSON and of the real model's paths box
    ("/api/walkthroughs/toy_grpo/tensors?step=clip&seed=3", "/api/walkthroughs/toy_grpo/step?step=clip&seed=3"),
    ("/api/walkthroughs/tiny_lm_grpo/tokens?node=advantages", "/api/walkthroughs/tiny_lm_grpo/step?node=advantages"),
    ("/api/walkthroughs/smollm_grpo/smollm-step?seed=77", "/api/walkthroughs/smollm_grpo/step?seed=77"),
    ("/walkthroughs/smollm_grpo/smollm-paths/r1-zero?step=policy", "/walkthroughs/smollm_grpo/paths/r1-zero?step=policy"),
]


def test_every_old_address_is_listed_here():
    """A kind that moves an address adds it to MOVED (or a test of its own): the manifests and this list agree."""
    olds = {m.old for k in KINDS for m in k.moved}
    assert olds == {"/api/walkthroughs/{walkthrough_id}/tensors", "/api/walkthroughs/{walkthrough_id}/tokens",
                    "/api/walkthroughs/{walkthrough_id}/smollm-step", "/api/walkthroughs/{walkthrough_id}/record",
                    "/walkthroughs/{walkthrough_id}/smollm-paths/{path}"}
    assert {m.new for k in KINDS for m in k.moved} == {STEP_API, PATHS_PANEL}


@pytest.mark.parametrize("old, new", MOVED)
def test_an_old_address_answers_308_to_the_new_one(client, old, new):
    for method in ("GET", "POST", "HEAD"):
        response = client.request(method, old)
        assert response.status_code == 308, (method, old, response.status_code)
        assert response.headers["location"] == new, method


def test_the_old_record_address_moves_too(client, record_id):
    response = client.get(f"/api/walkthroughs/{record_id}/record?group=0")
    assert response.status_code == 308
    assert response.headers["location"] == f"/api/walkthroughs/{record_id}/step?group=0"


@pytest.mark.parametrize("old, new", MOVED[:2])
def test_following_the_redirect_gives_the_new_answer(client, old, new):
    moved = client.get(old, follow_redirects=True)
    assert moved.status_code == 200 and moved.url.path == new.split("?")[0]
    assert moved.content == client.get(new).content


def test_each_kind_answers_at_the_one_step_address(client, record_id):
    toy = client.get("/api/walkthroughs/toy_grpo/step?node=ratio").json()
    assert toy["walkthrough"] == "toy_grpo" and "ratio" in json.dumps(toy)
    tokens = client.get("/api/walkthroughs/tiny_lm_grpo/step").json()
    assert tokens["completions"] and "loss" in json.dumps(tokens)
    record = client.get(f"/api/walkthroughs/{record_id}/step").json()
    assert record["group"] == 0 and record["completions"]
    smollm = client.get("/api/walkthroughs/smollm_grpo/step?seed=77")  # a job nobody started: a GET starts none
    assert smollm.status_code == 404 and smollm.json()["start"].startswith("POST /api/walkthroughs/smollm_grpo/step")


def test_each_kind_keeps_its_own_parameters_at_the_one_address(client, record_id):
    """The kind's handler validates its query: the toy's `clip_epsilon` is unknown to a recorded step."""
    assert client.get("/api/walkthroughs/toy_grpo/step?clip_epsilon=0.3&node=ratio").status_code == 200
    refused = client.get(f"/api/walkthroughs/{record_id}/step?clip_epsilon=0.3")
    assert refused.status_code == 422 and refused.json()["detail"][0]["param"] == "clip_epsilon"
    assert client.get("/api/walkthroughs/nope/step").status_code == 404


def test_a_view_only_walkthrough_has_no_step_json(make_client, tmp_path):
    from snapshots import other_snapshot
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "other.tensorviz.json").write_text(json.dumps(other_snapshot()))
    client = make_client(walkthroughs_dir=folder, follow_redirects=False)
    response = client.get("/api/walkthroughs/other/step")
    assert response.status_code == 409 and "view-only" in response.json()["error"]
    assert client.post("/api/walkthroughs/other/step").status_code in (405, 409)


def test_the_paths_box_is_one_address(client):
    """The tiny LM's and the real model's boxes at /walkthroughs/{id}/paths/{path}; a kind without one: 404."""
    assert client.get("/walkthroughs/tiny_lm_grpo/paths/r1-zero").status_code == 200
    assert client.get("/walkthroughs/smollm_grpo/paths/r1-zero?step=policy").status_code == 200
    assert client.get("/walkthroughs/toy_grpo/paths/r1-zero").status_code == 404


def _paths(routes) -> set[tuple[str, str]]:
    found = set()
    for route in routes:
        if isinstance(route, Mount):
            continue
        if isinstance(route, (APIRoute, Route)):
            found |= {(route.path, m) for m in (route.methods or ())}
        else:  # an included router
            found |= _paths(getattr(route, "routes", ()) or getattr(getattr(route, "original_router", None),
                                                                     "routes", ()))
    return found


def test_a_kind_adds_routes_only_through_its_manifest(client):
    """No kind's `install` includes a router: every route is the house's, a manifest's `routers`, or an old
    address's redirect."""
    served = _paths(client.app.router.routes)
    named = {p for k in KINDS for r in k.routers for p in _paths(r.routes)}
    moved = {(m.old, method) for k in KINDS for m in k.moved for method in ("GET", "POST", "HEAD")}
    house_prefixes = ("/api/walkthroughs/{walkthrough_id}/step", "/walkthroughs/{walkthrough_id}/paths/{path}")
    left = {(p, m) for p, m in served - named - moved if not p.startswith(house_prefixes)}
    # what remains is the house's own: health, the catalog API, docs, pages, the paths API
    for path, _method in left:
        assert not any(w in path for w in ("tensors", "tokens", "smollm", "record", "runs", "processes")), path
