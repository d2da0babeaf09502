"""The toy's ∂loss/∂log π in its two parts, through TestClient: the tensors API carries grad_surrogate and
grad_kl beside grad_logp for every sample, and the reference step (only it) draws them as stacked bars
with the API's numbers, the clipped rows showing a KL part and no surrogate part."""
from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from paths import ROOT

TENSORS = "/api/walkthroughs/toy_grpo/step"
CHART = '[data-chart="gradient-parts"]'


@pytest.fixture(scope="module")
def client(make_client):
    return make_client(walkthroughs_dir=ROOT / "walkthroughs")


@pytest.mark.parametrize("query", ["", "?preset=trl&beta=0.04", "?preset=gspo&beta=0.04", "?kl_placement=reward"])
def test_the_api_carries_the_split(client, query):
    body = client.get(TENSORS + query).json()
    for s in body["samples"]:
        assert {"grad_logp", "grad_surrogate", "grad_kl"} <= s.keys()
        assert abs(s["grad_surrogate"] + s["grad_kl"] - s["grad_logp"]) <= 1e-12
    kl = [s["grad_kl"] for s in body["samples"]]
    assert all(g == 0 for g in kl) if "reward" in query else any(g != 0 for g in kl)


def test_the_reference_step_and_only_it_draws_the_api_numbers(client):
    samples = client.get(TENSORS).json()["samples"]
    page = BeautifulSoup(client.get("/walkthroughs/toy_grpo/steps/reference").text, "html.parser")
    chart = page.select_one(CHART)
    assert chart is not None
    rows = chart.select(".parts-row")
    assert len(rows) == len(samples)
    clipped = 0
    for row, s in zip(rows, samples, strict=True):
        assert float(row["data-surrogate"]) == s["grad_surrogate"]
        assert float(row["data-kl"]) == s["grad_kl"]
        assert float(row["data-total"]) == s["grad_logp"]
        parts = {r["data-part"] for r in row.select("[data-part]")}
        if s["clip_active"]:  # the step's claim, drawn: no surrogate bar, a KL bar
            clipped += 1
            assert "is-clipped" in row["class"] and parts == {"kl"}
        else:
            assert parts == {"surrogate", "kl"}
    assert clipped > 0
    words = chart.select_one("figcaption").get_text(" ", strip=True)
    assert "from the clipped advantage term" in words and "β · ∂KL/∂log π" in words
    assert "the KL penalty still moves that answer" in words
    legend = [t.get_text() for t in chart.select(".legend-label")]
    assert legend == ["from the clipped advantage term", "from the KL penalty, β · ∂KL/∂log π"]

    for step in ("policy", "advantages", "clip"):  # the reference step's figure, and only its
        other = BeautifulSoup(client.get(f"/walkthroughs/toy_grpo/steps/{step}").text, "html.parser")
        assert other.select_one(CHART) is None, step
