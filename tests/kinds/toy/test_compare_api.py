"""GET /api/walkthroughs/{id}/compare, Compare mode on the page, and the one-click cases' claims.

Every case sentence in app/views/compare_cases.py is checked here against the numbers the
engine computes for the case's own URL, so a sentence cannot say what the page does not show.
"""
from __future__ import annotations

import json
import math
import shutil
from urllib.parse import urlencode

import pytest
from bs4 import BeautifulSoup
from pydantic import TypeAdapter
from snapshots import SEED_PATH, other_snapshot

from app.kinds.toy.views.compare_cases import CASE_IDS, CASES
from app.kinds.toy.web.schemas.compare import CompareBody, CompareNode, CompareSample, GradChangeBody
from app.web.schemas.errors import ErrorBody, ValidationErrorBody

COMPARE = "/api/walkthroughs/toy_grpo/compare"
TENSORS = "/api/walkthroughs/toy_grpo/step"
PAGE = "/walkthroughs/toy_grpo/steps/clip"
SAME_ON_BOTH_SIDES = ("action", "reward", "logp", "logp_old", "logp_ref")


@pytest.fixture(scope="module")
def client(tmp_path_factory, make_client):
    folder = tmp_path_factory.mktemp("walkthroughs")
    shutil.copy(SEED_PATH, folder / SEED_PATH.name)
    (folder / "other.json").write_text(json.dumps(other_snapshot()))
    return make_client(walkthroughs_dir=folder, follow_redirects=False)


def body_of(client, query: str = "") -> dict:
    response = client.get(COMPARE + query)
    assert response.status_code == 200, response.text[:500]
    sent = response.json()
    model = CompareBody.model_validate(sent)  # extra="forbid": any undeclared key fails
    assert model.model_dump(mode="json", exclude_unset=True).keys() == sent.keys()
    return sent


def case_body(client, case) -> dict:
    return body_of(client, "?" + urlencode({**case.a, **case.vs}))


# -- status and schema ------------------------------------------------------------------

@pytest.mark.parametrize("query", [
    "", "?vs_preset=trl", "?step=clip&vs_preset=verl", "?node=ratio&vs_preset=dapo",
    "?preset=trl&vs_preset=deepseekmath", "?vs_preset=verl&vs_dual_clip=none&vs_log_ratio_clamp=none",
    "?rewards=1,0,0,1&vs_advantage_std=none&vs_beta=0", "?vs_kl_placement=reward&vs_kl_estimator=k1",
])
def test_bodies_follow_their_schema(client, query):
    body = body_of(client, query)
    assert set(body["params_b"]) < set(body["params_a"])  # B: conventions only
    for side in "ab":
        assert len(body[side]["samples"]) == body["params_a"]["group_size"]
        for sample in body[side]["samples"]:
            assert set(sample) == set(CompareSample.model_fields)
    for change in body["grad_change"].values():
        assert change is None or set(change) == set(GradChangeBody.model_fields)
    for record in body["nodes"].values():
        assert set(record) == set(CompareNode.model_fields)


def test_side_a_is_the_tensors_step_and_b_runs_on_its_samples(client):
    body = body_of(client, "?step=clip&vs_preset=trl")
    tensors = client.get(TENSORS + "?step=clip").json()
    assert body["a"]["samples"] == tensors["samples"] and body["a"]["loss"] == tensors["loss"]
    assert body["params_a"] == tensors["params"]
    assert body["nodes"].keys() == tensors["nodes"].keys()
    for nid, record in body["nodes"].items():
        assert record["a"] == tensors["nodes"][nid]
    for sa, sb in zip(body["a"]["samples"], body["b"]["samples"], strict=True):
        for key in SAME_ON_BOTH_SIDES:
            assert sa[key] == sb[key], key
    assert body["params_b"]["preset"] == "trl" and body["params_b"]["beta"] == 0
    assert body["params_b"]["advantage_std"] == "sample" and body["params_b"]["kl_bias_correction"] is True
    assert body["a"]["loss"] != body["b"]["loss"]


def test_b_defaults_to_the_paper_and_vs_fields_override_the_preset(client):
    same = body_of(client)
    assert same["params_b"]["preset"] == "deepseekmath" and same["a"] == same["b"]
    assert all(c is None or c["relative"] == 0 for c in same["grad_change"].values())
    tuned = body_of(client, "?vs_preset=trl&vs_beta=0.04&vs_dual_clip=3")
    assert tuned["params_b"]["beta"] == 0.04 and tuned["params_b"]["dual_clip"] == 3
    assert tuned["params_b"]["advantage_std"] == "sample"  # the rest is still TRL's


def test_node_and_step_filters(client):
    assert list(body_of(client, "?node=ratio")["nodes"]) == ["ratio"]
    everything = body_of(client)
    assert set(everything["nodes"]) == set(client.get(TENSORS).json()["nodes"])
    # grad_change always covers every node and every policy parameter
    assert {"policy.logits.weight", "policy.logits.bias", "ratio", "output"} <= set(everything["grad_change"])
    assert everything["grad_change"]["advantages"] is None  # no gradient on either side


def test_grad_change_is_relative_to_side_a(client):
    body = body_of(client, "?vs_preset=trl")
    for nid, change in body["grad_change"].items():
        if change is None:
            continue
        if change["norm_a"] > 0:
            assert change["relative"] == pytest.approx(change["diff"] / change["norm_a"]), nid
        elif change["diff"] > 0:
            assert change["relative"] is None, nid
    # TRL has beta = 0: the divergence gets no gradient in B, so its change is exactly 100%
    assert body["grad_change"]["divergence"]["norm_b"] == 0 and body["grad_change"]["divergence"]["relative"] == 1


# -- refusals ---------------------------------------------------------------------------

@pytest.mark.parametrize("query, param, allowed", [
    ("?vs_beta=11", "vs_beta", "0 <= beta <= 10"),
    ("?vs_beta=abc", "vs_beta", "0 <= beta <= 10"),
    ("?vs_dual_clip=0.5", "vs_dual_clip", "1 < dual_clip <= 1000"),
    ("?vs_preset=nope", "vs_preset", None),
    ("?vs_advantage_std=bessel", "vs_advantage_std", None),
    ("?vs_kl_placement=reward&vs_kl_bias_correction=true", "vs_kl_bias_correction", None),
    ("?vs_seed=3", "vs_seed", None),  # B takes A's samples: only conventions may differ
    ("?beta=11&vs_preset=trl", "beta", "0 <= beta <= 10"),
])
def test_422_names_the_parameter(client, query, param, allowed):
    response = client.get(COMPARE + query)
    body = TypeAdapter(ValidationErrorBody).validate_python(response.json())
    assert response.status_code == 422
    assert body.detail[0].param == param and body.error.startswith(param)
    assert body.detail[0].allowed == allowed


@pytest.mark.parametrize("url, status", [
    ("/api/walkthroughs/nope/compare", 404), (COMPARE + "?step=nope", 404), (COMPARE + "?node=nope", 404),
    ("/api/walkthroughs/other/compare", 409),
])
def test_errors(client, url, status):
    response = client.get(url)
    assert response.status_code == status
    ErrorBody.model_validate(response.json())


def test_openapi_documents_the_route_and_its_vs_parameters(client):
    doc = client.get("/openapi.json").json()
    op = doc["paths"]["/api/walkthroughs/{walkthrough_id}/compare"]["get"]
    names = {p["name"] for p in op["parameters"]}
    assert {"vs_preset", "vs_beta", "vs_advantage_std", "vs_kl_bias_correction", "vs_dual_clip", "step", "node",
            "seed", "rewards", "preset"} <= names
    assert "vs_seed" not in names and "vs_rewards" not in names
    vs_beta = next(p for p in op["parameters"] if p["name"] == "vs_beta")
    assert vs_beta["description"].startswith("Side B: ")
    assert op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"] == \
        "#/components/schemas/CompareBody"
    assert doc["components"]["schemas"]["CompareBody"]["additionalProperties"] is False
    assert set(op["responses"]) == {"200", "404", "409", "422", "503"}


def test_gzip_and_the_compute_executor(client):
    response = client.get(COMPARE + "?vs_preset=trl", headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200 and response.headers["content-encoding"] == "gzip"
    assert response.headers["vary"] == "Accept-Encoding"


# -- the one-click cases: every sentence against the numbers ------------------------------

def advantages(body, side):
    return [s["advantage"] for s in body[side]["samples"]]


def param_grads_zero(body_nodes_or_changes) -> bool:
    return all(c is not None and c["norm_a"] == 0 for c in body_nodes_or_changes)


def test_cases_are_the_four_known_failures():
    assert CASE_IDS == ("equal-rewards", "one-correct", "sample-std", "kl-times-ratio")


def test_case_equal_rewards(client):
    case = CASES[0]
    body = case_body(client, case)
    assert body["params_a"]["beta"] == 0 and body["params_b"]["beta"] == 0.04
    assert "β = 0 (A)" in case.sentence and "β = 0.04 (B)" in case.sentence
    # "every advantage is exactly 0"
    assert all(v == 0 for v in advantages(body, "a") + advantages(body, "b"))
    # "with β = 0 (A) the loss is exactly 0 and so is every gradient"
    assert body["a"]["loss"] == 0
    params = [body["grad_change"]["policy.logits.weight"], body["grad_change"]["policy.logits.bias"]]
    assert param_grads_zero(params)
    for nid in ("policy", "policy.logits", "ratio", "input"):
        assert body["grad_change"][nid]["norm_a"] == 0, nid
    # "with β = 0.04 (B) the KL penalty alone still gives the policy a gradient"
    assert body["b"]["loss"] > 0
    assert all(p["norm_b"] > 0 and p["relative"] is None for p in params)


def test_case_one_correct(client):
    case = CASES[1]
    body = case_body(client, case)
    rewards = [s["reward"] for s in body["a"]["samples"]]
    assert rewards == [1, 0, 0, 0, 0, 0, 0, 0] and body["params_b"]["advantage_std"] == "none"
    a, b = advantages(body, "a"), advantages(body, "b")
    # "Â ≈ 2.645 (nearly √7) and the seven others −0.38 each"
    assert f"{a[0]:.3f}" == "2.645" and math.sqrt(7) - 0.001 < a[0] < math.sqrt(7)
    assert all(f"{v:.2f}" == "-0.38" for v in a[1:])
    # "centred only (B) they are 0.875 and −0.125"
    assert b[0] == 0.875 and all(v == -0.125 for v in b[1:])
    # "the std of a one-in-eight group is only 0.33 ... about 3×"
    std = math.sqrt(sum((r - 1 / 8) ** 2 for r in rewards) / 8)
    assert f"{std:.2f}" == "0.33"
    assert all(round(x / y) == 3 for x, y in zip(a, b, strict=True))
    for text in ("2.645", "√7", "−0.38", "0.875", "−0.125", "0.33", "3×"):
        assert text in case.sentence, text


def test_case_sample_std(client):
    case = CASES[2]
    body = case_body(client, case)
    g = body["params_a"]["group_size"]
    assert g == 8 and body["params_b"]["advantage_std"] == "sample"
    a, b = advantages(body, "a"), advantages(body, "b")
    # "no advantage changes sign, so the same rows are clipped"
    assert all((x > 0) == (y > 0) and (x < 0) == (y < 0) for x, y in zip(a, b, strict=True))
    assert [s["clip_active"] for s in body["a"]["samples"]] == [s["clip_active"] for s in body["b"]["samples"]]
    assert any(s["clip_active"] for s in body["a"]["samples"])
    # "multiplied by √((G−1)/G) = √(7/8) ≈ 0.935 (to within ε)"
    factor = math.sqrt((g - 1) / g)
    assert f"{factor:.3f}" == "0.935"
    for x, y in zip(a, b, strict=True):
        assert y == pytest.approx(x * factor, rel=1e-3)
    assert "√(7/8) ≈ 0.935" in case.sentence


def test_case_kl_times_ratio(client):
    case = CASES[3]
    body = case_body(client, case)
    assert body["params_a"]["beta"] == body["params_b"]["beta"] == 0.04
    assert body["params_a"]["kl_estimator"] == body["params_b"]["kl_estimator"] == "k3"
    assert body["params_b"]["kl_bias_correction"] is True and body["params_a"]["kl_bias_correction"] is False
    low, high = [], []
    for sa, sb in zip(body["a"]["samples"], body["b"]["samples"], strict=True):
        assert sa["divergence"] == sb["divergence"]  # "the same k3 estimate D"
        assert sa["kl_used"] == sa["divergence"]
        assert sb["kl_used"] == pytest.approx(sb["divergence"] * sb["ratio"], rel=1e-12)  # "D × ρ"
        (low if sb["ratio"] < 1 else high).append(sb["ratio"])
    # "the three completions with ρ ≈ 0.55 count only 55% of their KL, the five with ρ ≈ 1.13 count 13% more"
    assert len(low) == 3 and len(high) == 5
    assert all(f"{r:.2f}" == "0.55" and f"{r:.0%}" == "55%" for r in low)
    assert all(f"{r:.2f}" == "1.13" and f"{r - 1:.0%}" == "13%" for r in high)
    for text in ("three", "0.55", "55%", "five", "1.13", "13% more", "β = 0.04"):
        assert text in case.sentence, text


# -- Compare mode on the page -------------------------------------------------------------

def soup(response):
    return BeautifulSoup(response.text, "html.parser")


def test_page_shows_both_sides_and_keeps_compare_mode_in_every_link(client):
    r = client.get(PAGE + "?vs_preset=trl&node=ratio")
    assert r.status_code == 200
    page = soup(r)
    panel = page.select_one("#compare.compare-panel.is-on")
    assert "A is the step as this page sets it" in panel.select_one("#side-a-words").get_text()
    assert "preset trl" in panel.select_one("#side-b-words").get_text()
    rows = page.select("#compare-samples tbody tr")
    assert len(rows) == 8 and len(rows[0].select("td.side-a")) == len(rows[0].select("td.side-b")) == 6
    assert page.select_one('.graph [data-node-id="ratio"] .grad-mark .grad-tag').get_text() == "∇ 6.5%"
    assert page.select_one("#compare-node [data-relative]")
    for link in page.select('#step-panel a[href], .graph a[href], #overview-toggle'):
        assert "vs_preset=trl" in link["href"], link
    assert "vs_preset" not in page.select_one("#compare-leave")["href"]


def test_page_cases_link_and_explain(client):
    page = soup(client.get(PAGE))
    links = page.select(".compare-cases li")
    assert [li["data-case"] for li in links] == list(CASE_IDS)
    for li, case in zip(links, CASES, strict=True):
        assert li.select_one(".case-sentence").get_text() == case.sentence
        opened = client.get(li.select_one("a")["href"])
        assert opened.status_code == 200, li.select_one("a")["href"]  # canonical: no redirect
        shown = soup(opened).select_one(".case-explain")
        assert shown["data-case"] == case.id and case.sentence in shown.get_text()


def test_page_refuses_bad_vs_values_next_to_the_field(client):
    r = client.get(PAGE + "?vs_beta=11")
    assert r.status_code == 422
    page = soup(r)
    assert "0 <= beta <= 10" in page.select_one("#e-vs_beta").get_text()
    assert page.select_one("#c-vs_beta")["aria-invalid"] == "true"
    other = soup(client.get(PAGE + "?vs_seed=3"))
    assert "vs_seed" in other.select_one(".compare-errors").get_text()


def test_page_canonical_compare_url(client):
    r = client.get(PAGE + "?vs_beta=0.04")
    assert r.status_code == 303 and r.headers["location"] == PAGE + "?vs_preset=deepseekmath"
    r = client.get(PAGE + "?vs_preset=trl&vs_dual_clip=none")  # TRL has no dual clip anyway
    assert r.status_code == 303 and r.headers["location"] == PAGE + "?vs_preset=trl"
    assert client.get(PAGE + "?vs_preset=verl&vs_dual_clip=none").status_code == 200  # verl's 3 turned off


def test_the_parameter_form_keeps_compare_mode(client):
    """Recompute submits the form by GET: side B's vs_ values travel as hidden inputs."""
    page = BeautifulSoup(client.get("/walkthroughs/toy_grpo/steps/clip?vs_preset=trl&vs_beta=0.04").text,
                         "html.parser")
    hidden = {i["name"]: i["value"] for i in page.select("#param-form input[type=hidden]")
              if i["name"].startswith("vs_")}
    assert hidden == {"vs_preset": "trl", "vs_beta": "0.04"}
    fields = {el["name"]: el.get("value", "") for el in page.select("#param-form input[name]")}
    fields.update({s["name"]: s.select_one("option[selected]")["value"] for s in page.select("#param-form select")})
    again = client.get("/walkthroughs/toy_grpo/steps/clip?" + urlencode({**fields, "seed": "3"}), follow_redirects=True)
    assert again.status_code == 200 and "vs_preset=trl" in str(again.url) and "seed=3" in str(again.url)
    assert BeautifulSoup(again.text, "html.parser").select_one("#compare-samples") is not None
