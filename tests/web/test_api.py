"""JSON API through TestClient(create_app(...)): every route and every error case."""
import json
import math
import shutil

import pytest
from fastapi.testclient import TestClient
from paths import SEED_PATH

from app.house import create_app
from app.web.settings import Settings

SEED = SEED_PATH
TENSORS = "/api/walkthroughs/toy_grpo/step"


@pytest.fixture(scope="module")
def walkthroughs_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("walkthroughs")
    shutil.copy(SEED, folder / SEED.name)
    (folder / "broken.json").write_text('{"format": "tensorviz.graph", ')
    other = json.loads(SEED.read_text())
    other["document"]["semantic"]["nodes"][-1]["node_id"] = "python@renamed#0"
    other["document"]["semantic"]["nodes"][6]["metadata"]["moduleMembers"] = ["python@renamed#0"]
    for edge in other["document"]["semantic"]["edges"]:
        for end in ("source_node_id", "target_node_id"):
            if edge[end] == "python@clipped#0":
                edge[end] = "python@renamed#0"
    pos = other["document"]["view"]["node_positions"]
    pos["python@renamed#0"] = pos.pop("python@clipped#0")
    for step in other["collaboration"]["walkthrough"]["steps"] + other["collaboration"]["savedViews"]:
        step["view"]["nodePositions"]["python@renamed#0"] = step["view"]["nodePositions"].pop("python@clipped#0")
        step["anchors"] = []
    (folder / "view_only.json").write_text(json.dumps(other))
    return folder


@pytest.fixture(scope="module")
def client(walkthroughs_dir, make_client):
    return make_client(walkthroughs_dir=walkthroughs_dir)


def test_healthz_and_docs(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/docs").status_code == 200
    spec = client.get("/openapi.json").json()
    params = {p["name"] for p in spec["paths"]["/api/walkthroughs/{walkthrough_id}/step"]["get"]["parameters"]}
    assert {"seed", "group_size", "clip_epsilon", "beta", "rewards", "step", "node"} <= params


def test_list_walkthroughs_includes_errors(client):
    items = {w["id"]: w for w in client.get("/api/walkthroughs").json()}
    assert set(items) == {"toy_grpo", "broken", "view_only"}
    assert items["toy_grpo"] == {"id": "toy_grpo", "source": SEED.name, "name": "ToyGRPO",
                                 "title": "See what changes during reasoning post-training",
                                 "steps": 4, "runnable": True, "error": None}
    assert items["broken"]["error"].startswith("broken.json: $:")
    assert items["view_only"]["runnable"] is False and items["view_only"]["error"] is None


def test_walkthrough_summary(client):
    body = client.get("/api/walkthroughs/toy_grpo").json()
    assert body["opening_step"] == "advantages"
    assert len(body["nodes"]) == 18 and len(body["edges"]) == 26
    assert [s["id"] for s in body["steps"]] == ["policy", "advantages", "clip", "reference"]
    assert body["steps"][2]["camera"] == {"x": -1770, "y": -57, "z": 1.25}
    clipped = next(m for m in body["modules"] if m["id"] == "clipped")
    assert clipped == {"id": "clipped", "template": "model::ClippedSurrogate",
                       "members": ["python@clipped#0"], "collapsed": True}


def test_tensors_for_a_step_hold_its_visible_nodes(client):
    body = client.get(TENSORS, params={"step": "clip"}).json()
    assert body["walkthrough"] == "toy_grpo" and body["step"] == "clip" and body["device"] == "cpu"
    assert body["selected"] == ["clipped"]
    top_level = {"input", "policy", "old_policy", "reference_policy", "advantages", "ratio", "clipped",
                 "divergence", "sub@ToyGRPO#0", "output"}
    assert set(body["nodes"]) == top_level | {"python@clipped#0"}
    g = body["params"]["group_size"]
    assert len(body["samples"]) == g
    assert body["nodes"]["clipped"]["values"] == [s["clipped"] for s in body["samples"]]
    # the numbers satisfy docs/design.md §3
    eps, beta = body["params"]["clip_epsilon"], body["params"]["beta"]
    rewards = [s["reward"] for s in body["samples"]]
    mean = sum(rewards) / g
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / g)
    for s in body["samples"]:
        assert s["advantage"] == pytest.approx((s["reward"] - mean) / (std + body["params"]["advantage_epsilon"]))
        assert s["ratio"] == pytest.approx(math.exp(s["logp"] - s["logp_old"]))
        clip = min(max(s["ratio"], 1 - eps), 1 + eps)
        assert s["clipped"] == pytest.approx(min(s["ratio"] * s["advantage"], clip * s["advantage"]))
        d = s["logp_ref"] - s["logp"]
        assert s["divergence"] == pytest.approx(math.exp(d) - d - 1)
    assert body["loss"] == pytest.approx(-sum(s["clipped"] - beta * s["divergence"] for s in body["samples"]) / g)


def test_tensors_without_step_hold_every_node(client):
    body = client.get(TENSORS).json()
    assert len(body["nodes"]) == 18 and body["step"] is None
    assert body["nodes"]["old_policy.logits"]["grad"] is None
    assert body["nodes"]["old_policy.logits"]["no_grad_reason"]
    assert body["parameter_grads"]["policy.logits.weight"]["shape"] == [4, 3]


def test_single_node(client):
    body = client.get(TENSORS, params={"node": "policy.logits"}).json()
    assert list(body["nodes"]) == ["policy.logits"]
    assert body["nodes"]["policy.logits"]["shape"] == [1, 4]


def test_params_are_echoed_and_change_numbers(client):
    a = client.get(TENSORS, params={"seed": 1, "clip_epsilon": 0.1, "beta": 0.001}).json()
    assert a["params"]["seed"] == 1 and a["params"]["clip_epsilon"] == 0.1 and a["params"]["beta"] == 0.001
    b = client.get(TENSORS, params={"seed": 2}).json()
    assert a["samples"] != b["samples"]
    assert client.get(TENSORS, params={"seed": 1, "clip_epsilon": 0.1, "beta": 0.001}).json() == a


def test_equal_rewards_override(client):
    body = client.get(TENSORS, params={"rewards": "1,1,1,1"}).json()
    assert body["params"]["group_size"] == 4
    assert [s["advantage"] for s in body["samples"]] == [0, 0, 0, 0]


@pytest.mark.parametrize("query, param", [
    ({"group_size": 1}, "group_size"), ({"group_size": 4097}, "group_size"),
    ({"clip_epsilon": 0}, "clip_epsilon"), ({"clip_epsilon": 1}, "clip_epsilon"),
    ({"clip_epsilon": "nan"}, "clip_epsilon"), ({"clip_epsilon": "inf"}, "clip_epsilon"),
    ({"beta": -1}, "beta"), ({"beta": "-inf"}, "beta"), ({"advantage_epsilon": "NaN"}, "advantage_epsilon"),
    ({"learning_rate": 0}, "learning_rate"), ({"seed": "abc"}, "seed"), ({"iteration": 99}, "iteration"),
    ({"group_size": 8, "rewards": "1,0,1"}, "rewards"), ({"rewards": "1,zero"}, "rewards"),
    ({"rewards": "1,inf"}, "rewards"), ({"inner_step": 4}, "inner_step"),
])
def test_bad_parameters_are_422_naming_the_parameter(client, query, param):
    response = client.get(TENSORS, params=query)
    assert response.status_code == 422
    body = response.json()
    assert body["detail"][0]["param"] == param
    assert body["error"].startswith(f"{param}: ")
    if param not in ("rewards", "inner_step"):
        assert body["detail"][0]["allowed"] and param in body["detail"][0]["allowed"]


@pytest.mark.parametrize("url, fragment", [
    ("/api/walkthroughs/nope", "unknown walkthrough 'nope'"),
    ("/api/walkthroughs/nope/step", "unknown walkthrough 'nope'"),
    (TENSORS + "?step=nope", "unknown step 'nope'"),
    (TENSORS + "?node=nope", "unknown node 'nope'"),
    ("/api/walkthroughs/broken", "failed to load"),
])
def test_unknown_things_are_404(client, url, fragment):
    response = client.get(url)
    assert response.status_code == 404
    assert fragment in response.json()["error"]


def test_view_only_snapshot_refuses_tensors_cleanly(client):
    assert client.get("/api/walkthroughs/view_only").status_code == 200
    response = client.get("/api/walkthroughs/view_only/step")
    assert response.status_code == 409
    assert "view-only" in response.json()["error"]


def test_device_auto_reports_what_it_chose(walkthroughs_dir):
    import torch
    app = create_app(Settings(walkthroughs_dir=walkthroughs_dir, device="auto"))
    body = TestClient(app).get(TENSORS).json()
    assert body["device"] == ("cuda" if torch.cuda.is_available() else "cpu")


def test_diverging_training_is_a_422_not_a_500(client):
    response = client.get(TENSORS, params={"learning_rate": 10, "beta": 10, "iteration": 50, "inner_steps": 16})
    assert response.status_code == 422
    assert response.json()["detail"][0]["param"] == "learning_rate"
