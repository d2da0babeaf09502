"""The tiny LM's ∂loss/∂log π in its two parts, through TestClient: the tokens API carries grad_surrogate and
grad_kl beside grad for every token, and the KL step (only it) draws some tokens' parts as stacked bars
with the API's numbers, every clipped token among them with a KL part and no surrogate part."""
from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from paths import ROOT

API = "/api/walkthroughs/tiny_lm_grpo/step"
CHART = '[data-chart="gradient-parts"]'


@pytest.fixture(scope="module")
def client(make_client):
    return make_client(walkthroughs_dir=ROOT / "walkthroughs", follow_redirects=False)


@pytest.fixture(scope="module")
def tokens(client):
    body = client.get(API).json()
    return {f"{i}:{t}": tok for i, c in enumerate(body["completions"]) for t, tok in enumerate(c["tokens"])}


def test_the_api_carries_the_split(tokens):
    for tok in tokens.values():
        assert abs(tok["grad_surrogate"] + tok["grad_kl"] - tok["grad"]) <= 1e-12
    assert any(tok["grad_kl"] != 0 for tok in tokens.values())


def test_the_kl_step_and_only_it_draws_the_api_numbers(client, tokens):
    page = BeautifulSoup(client.get("/walkthroughs/tiny_lm_grpo/steps/kl").text, "html.parser")
    chart = page.select_one(f"#token-panel {CHART}")
    assert chart is not None
    rows = chart.select(".parts-row")
    clipped = sorted((k for k, tok in tokens.items() if tok["clip_active"]), key=lambda k: -abs(tokens[k]["grad_kl"]))
    assert clipped and {r["data-row"] for r in rows} >= set(clipped[:8])  # the clipped the KL pulls hardest
    for row in rows:
        tok = tokens[row["data-row"]]
        assert (float(row["data-surrogate"]), float(row["data-kl"]), float(row["data-total"])) == (
            tok["grad_surrogate"], tok["grad_kl"], tok["grad"])
        parts = {r["data-part"] for r in row.select("[data-part]")}
        if tok["clip_active"]:
            assert parts == {"kl"}, row["data-row"]
    assert "the KL penalty still pulls it" in chart.select_one("figcaption").get_text(" ", strip=True)

    for step in ("ratio", "aggregation", "update"):  # the KL step's figure, and only its
        other = BeautifulSoup(client.get(f"/walkthroughs/tiny_lm_grpo/steps/{step}").text, "html.parser")
        assert other.select_one(CHART) is None, step
