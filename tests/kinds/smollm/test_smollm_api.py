"""The real model's step as JSON (app/kinds/smollm/web/api.py), on the suite's tiny GGUF: a GET never starts it
(404 naming the POST), a POST does, and the finished step answers every node: the head's in full, each module's
per-token norms, equal to the stored result's; bad input is a 422 naming the field, an unknown node a 404."""
from __future__ import annotations

import time

import pytest

from app.engine.jobs.client import JOBS
from app.kinds.smollm.engine import step_task
from app.kinds.smollm.engine.params import SmolParams

URL = "/api/walkthroughs/smollm_grpo/smollm-step"
QUERY = "group_size=2&max_new_tokens=6&seed=11&inner_steps=1"
PARAMS = SmolParams(group_size=2, max_new_tokens=6, seed=11, inner_steps=1)


@pytest.fixture(scope="module")
def done(client):
    missing = client.get(f"{URL}?{QUERY}")
    assert missing.status_code == 404 and missing.json()["start"] == f"POST {URL}?{QUERY}"
    assert JOBS.find(step_task.TASK, step_task.step_params(PARAMS, "cpu")) is None
    assert client.post(f"{URL}?{QUERY}").status_code in (200, 202)
    deadline = time.monotonic() + 120
    while (answer := client.get(f"{URL}?{QUERY}")).status_code == 202:
        assert answer.headers["cache-control"] == "no-store" and time.monotonic() < deadline
        time.sleep(0.2)
    assert answer.status_code == 200 and answer.json()["state"] == "done", answer.text[:500]
    job = JOBS.find(step_task.TASK, step_task.step_params(PARAMS, "cpu"))
    return answer.json()["result"], JOBS.result(job)


def test_every_node_is_listed_with_its_size(done):
    body, result = done
    assert set(body["nodes"]) == set(result.head) | set(result.wide)
    assert {body["nodes"][n]["size"] for n in result.head} == {"head"}
    some = "policy.blocks.3.attention.q"
    assert body["nodes"][some]["shape"] == list(result.wide[some].shape)
    assert body["loss"] == result.loss and len(body["completions"]) == 2


def test_one_head_node_in_full(client, done):
    _body, result = done
    node = client.get(f"{URL}?{QUERY}&node=advantages").json()["result"]["node"]
    assert node["values"] == pytest.approx(list(result.head["advantages"].values))
    logp = client.get(f"{URL}?{QUERY}&node=policy.token_logprobs").json()["result"]["node"]
    assert logp["grad"] is not None and len(logp["grad"]) == 2


def test_one_module_per_token(client, done):
    _body, result = done
    nid = "policy.blocks.5.mlp.down"
    node = client.get(f"{URL}?{QUERY}&node={nid}").json()["result"]["node"]
    assert node["value_norm"] == [list(r) for r in result.wide[nid].value_norm]
    assert node["grad_norm"] == [list(r) for r in result.wide[nid].grad_norm]
    assert len(node["top_dims"]) == len(result.wide[nid].top_dims)


@pytest.mark.parametrize(("query", "status", "field"), [("group_size=99", 422, "group_size"),
                                                        ("temperature=x", 422, "temperature"),
                                                        ("clip_eps=0.3", 422, "clip_eps"),
                                                        (f"{QUERY}&node=policy.blocks.99.mlp.down", 404, None)])
def test_bad_input_is_refused_and_costs_nothing(client, done, query, status, field):
    before = len(JOBS.store.listing())
    answer = client.post(f"{URL}?{query}") if status == 422 else client.get(f"{URL}?{query}")
    assert answer.status_code == status, answer.text[:300]
    if field:
        assert field in answer.text
    assert len(JOBS.store.listing()) == before
