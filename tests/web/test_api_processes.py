"""Process API routes and the tensors endpoint in process mode."""
import pytest
from runs import start, start_default_runs

TENSORS = "/api/walkthroughs/toy_grpo/step"


@pytest.fixture(scope="module")
def client(make_client):
    client = make_client()
    start_default_runs(client.app)  # as `python -m app` does at start-up: the default paths' runs
    return client


def test_list_processes(client):
    body = client.get("/api/processes").json()
    assert [p["id"] for p in body["processes"]] == ["r1-zero", "r1", "distillation"]
    r1 = body["processes"][1]
    assert [(s["id"], s["kind"]) for s in r1["stages"]] == [
        ("cold-start", "sft"), ("reasoning-rl", "grpo"), ("rejection-sampling", "rejection_sampling"),
        ("sft-from-base", "sft"), ("all-scenarios-rl", "grpo")]
    assert r1["stages"][1]["paper"]["section"] == "§2.3.2" and r1["stages"][1]["toy_analogue"]
    assert body["processes"][2]["has_rl"] is False and body["processes"][0]["has_rl"] is True


def test_process_run_has_curves_per_stage(client):
    start(client, "/api/processes/r1?seed=2")  # a GET never starts a run
    body = client.get("/api/processes/r1", params={"seed": 2}).json()
    assert body["seed"] == 2
    rl = body["stages"][1]
    assert len(rl["curve"]) == rl["iterations"] == 40
    assert set(rl["curve"][0]) == {"iteration", "eval_reward", "accuracy", "p_correct", "p_mixed",
                                   "divergence", "loss", "train_reward"}
    assert body["stages"][2]["curve"] == [] and body["stages"][2]["dataset_size"] > 0
    assert client.get("/api/processes/r1", params={"seed": 2}).json() == body  # deterministic, cached


def test_compare(client):
    body = client.get("/api/processes/compare").json()
    assert [p["id"] for p in body["processes"]] == ["r1-zero", "r1", "distillation"]
    assert all(0 <= p["final"]["accuracy"] <= 1 for p in body["processes"])


@pytest.mark.parametrize("url, status", [
    ("/api/processes/nope", 404), ("/api/processes/r1?seed=-1", 422), ("/api/processes/r1?iterations_scale=9", 422),
    (TENSORS + "?process=nope", 404), (TENSORS + "?process=r1&stage=nope", 404), (TENSORS + "?stage=rl", 422),
])
def test_errors(client, url, status):
    assert client.get(url).status_code == status


def test_tensors_in_sft_stage_mark_inactive_nodes(client):
    body = client.get(TENSORS, params={"process": "r1", "stage": "cold-start", "prompt": 0}).json()
    assert body["process"] == "r1" and body["stage"] == "cold-start" and body["kind"] == "sft"
    assert body["nodes"]["ratio"] == {"inactive": True, "reason": "takes no part in a supervised (sft) stage",
                                      "shape": None, "dtype": None, "values": None, "grad": None}
    assert body["nodes"]["policy.logits"]["grad"] is not None
    assert body["loss"] == body["nodes"]["output"]["values"]


def test_tensors_default_to_the_last_stage(client):
    body = client.get(TENSORS, params={"process": "distillation"}).json()
    assert body["stage"] == "student-sft" and body["kind"] == "sft"
    grpo = client.get(TENSORS, params={"process": "r1-zero", "step": "clip"}).json()
    assert grpo["kind"] == "grpo" and len(grpo["samples"]) == 16 and "python@clipped#0" in grpo["nodes"]
