"""The real model's step as JSON (app/kinds/smollm/web/api.py), on the suite's tiny GGUF: a GET never starts it
(404 naming the POST), a POST does, and the finished step answers every node: the head's in full, each module's
per-token norms, equal to the stored result's; bad input is a 422 naming the field, an unknown node a 404."""
from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest
from runs import jobs_of

from app.kinds.smollm.engine import step_task
from app.kinds.smollm.engine.params import SmolParams

URL = "/api/walkthroughs/smollm_grpo/step"
QUERY = "group_size=2&max_new_tokens=6&seed=11&inner_steps=1"
PARAMS = SmolParams(group_size=2, max_new_tokens=6, seed=11, inner_steps=1)


@pytest.fixture(scope="module")
def done(client):
    missing = client.get(f"{URL}?{QUERY}")
    assert missing.status_code == 404 and missing.json()["start"] == f"POST {URL}?{QUERY}"
    assert jobs_of(client).find(step_task.step_job(PARAMS, "cpu")) is None
    assert client.post(f"{URL}?{QUERY}").status_code in (200, 202)
    deadline = time.monotonic() + 120
    while (answer := client.get(f"{URL}?{QUERY}")).status_code == 202:
        assert answer.headers["cache-control"] == "no-store" and time.monotonic() < deadline
        time.sleep(0.2)
    assert answer.status_code == 200 and answer.json()["state"] == "done", answer.text[:500]
    job = jobs_of(client).find(step_task.step_job(PARAMS, "cpu"))
    return answer.json()["result"], jobs_of(client).result(job)


def test_every_node_is_listed_with_its_size(done):
    body, result = done
    assert set(body["nodes"]) == set(result.head) | set(result.wide)
    assert {body["nodes"][n]["size"] for n in result.head} == {"head"}
    some = "policy.blocks.3.attention.q"
    assert body["nodes"][some]["shape"] == list(result.wide[some].shape)
    assert body["loss"] == result.loss and len(body["completions"]) == 2


def test_the_result_echoes_the_conventions_the_optimiser_and_what_the_step_computed(client, done):
    """The resolved parameters and conventions, the optimiser as TRL's GRPOConfig names it, the log-prob
    temperature, the ids, masks and prompt length, every token's numbers (log π after the update included), the
    other gradient norms, the norms before and after clipping, the moved tokens, and (with the kept softmax
    node) every head's attention weights: each the stored result's."""
    body, result = done
    assert body["params"] == PARAMS.model_dump(mode="json") and body["conventions"]["beta"] == PARAMS.beta
    assert body["logprob_temperature"] == PARAMS.temperature == result.logprob_temperature
    assert body["optimizer"] == {"name": "AdamW", "learning_rate": PARAMS.learning_rate,
                                 "betas": [PARAMS.adam_beta1, PARAMS.adam_beta2], "eps": PARAMS.adam_epsilon,
                                 "weight_decay": PARAMS.weight_decay, "max_grad_norm": PARAMS.max_grad_norm,
                                 "num_iterations": 1, "steps_before_recorded": 0}
    assert body["prompt_length"] == result.prompt_length and body["ids"] == result.ids and body["mask"] == result.mask
    first = body["completions"][0]
    assert first["token_ids"] == list(result.completions[0].token_ids)
    assert [t["logp_after"] for t in first["tokens"]] == [t.logp_after for t in result.completions[0].tokens]
    assert all(t["ratio"] == 1.0 for c in body["completions"] for t in c["tokens"])  # μ = 1
    assert body["other_grad_norms"] == result.other_grad_norms and body["policy_grad_norm"] == result.policy_grad_norm
    assert body["grad_norm"]["before_clip"] == result.grad_norm_before_clip
    assert body["grad_norm"]["after_clip"] <= PARAMS.max_grad_norm * (1 + 1e-6)
    assert [(m["completion"], m["position"], m["delta"]) for m in body["moved"]] == \
        [(m.completion, m.position, m.delta) for m in result.moved]
    kept = client.get(f"{URL}?{QUERY}&node={quote(f'softmax@policy.blocks.{result.attention_block}.attention#0')}")
    assert kept.json()["result"]["node"]["weights"] == json.loads(json.dumps(list(result.attention)))
    other = client.get(f"{URL}?{QUERY}&node={quote('softmax@policy.blocks.0.attention#0')}").json()["result"]["node"]
    assert result.attention_block != 0 and "weights" not in other  # only the kept block's


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
    before = len(jobs_of(client).store.listing())
    answer = client.post(f"{URL}?{query}") if status == 422 else client.get(f"{URL}?{query}")
    assert answer.status_code == status, answer.text[:300]
    if field:
        assert field in answer.text
    assert len(jobs_of(client).store.listing()) == before
