"""A recorded step's ∂loss/∂log π in its two parts, through TestClient: the record API carries grad_surrogate
and grad_kl beside grad for every token; the KL step draws some tokens' parts as stacked bars with the API's
numbers; the what-if draws the tokens whose push changes sign, as many as its table counts, each recorded
and what-if, with the what-if's own parts."""
from __future__ import annotations

import json
import math

import pytest
from bs4 import BeautifulSoup
from record_factory import make_record

CHART = '[data-chart="gradient-parts"]'


@pytest.fixture(scope="module")
def client(make_client):
    return make_client()


@pytest.fixture(scope="module")
def wid(client):
    raw = make_record(seed=3, groups=2, size=4, lengths=(20, 60), drift=0.4)
    r = client.post("/api/walkthroughs", files={"file": ("r.grpo-step.json", json.dumps(raw), "application/json")})
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


def _tokens(client, wid) -> dict[str, tuple]:
    """'batch row:token' -> (grad_surrogate, grad_kl, grad, clipped), every group's (rows in group order)."""
    out, row = {}, 0
    for group in range(client.get(f"/api/walkthroughs/{wid}/step").json()["groups"]):
        for c in client.get(f"/api/walkthroughs/{wid}/step?group={group}").json()["completions"]:
            for t in range(len(c["grad"])):
                out[f"{row}:{t}"] = (c["grad_surrogate"][t], c["grad_kl"][t], c["grad"][t],
                                     c["clip_low"][t] or c["clip_high"][t])
            row += 1
    return out


def test_the_api_carries_the_split(client, wid):
    tokens = _tokens(client, wid)
    for s, k, g, _ in tokens.values():
        assert abs(s + k - g) <= 1e-12
    assert any(k != 0 for _, k, _, _ in tokens.values())


def test_the_kl_step_and_only_it_draws_the_api_numbers(client, wid):
    tokens = _tokens(client, wid)
    page = BeautifulSoup(client.get(f"/walkthroughs/{wid}/steps/kl").text, "html.parser")
    chart = page.select_one(f"#record-figure {CHART}")
    assert chart is not None
    rows = chart.select(".parts-row")
    assert rows
    clipped = 0
    for row in rows:
        s, k, g, clip = tokens[row["data-row"]]
        assert (float(row["data-surrogate"]), float(row["data-kl"]), float(row["data-total"])) == (s, k, g)
        if clip:
            clipped += 1
            assert s == 0 and k != 0
            assert {r["data-part"] for r in row.select("[data-part]")} == {"kl"}
    assert clipped > 0
    for step in ("group", "ratio", "loss", "diagnostics"):  # the KL step's figure (and the what-if's), only
        other = BeautifulSoup(client.get(f"/walkthroughs/{wid}/steps/{step}").text, "html.parser")
        assert other.select_one(CHART) is None, step


def test_the_what_if_draws_each_sign_change_in_its_parts(client, wid):
    """β = 0 takes the KL part away: tokens whose small surrogate part the KL part outweighed turn."""
    page = BeautifulSoup(client.get(f"/walkthroughs/{wid}/steps/loss?preset=dapo").text, "html.parser")
    table = page.select_one("#record-compare")
    count = next(int(tr.select("td")[1].get_text().replace(",", "")) for tr in table.select("tbody tr")
                 if "changes sign" in tr.th.get_text())
    chart = page.select_one(f"#record-figure {CHART}")
    assert count > 0 and chart is not None
    assert f"{count:,} token{'s' if count != 1 else ''} change sign" in chart.select_one("figcaption").get_text()
    rows = chart.select(".parts-row")
    assert len(rows) == 2 * min(count, 5)
    own = _tokens(client, wid)
    # the what-if's own numbers: the record API does not serve a what-if, so the page's are checked for
    # consistency (parts add up, the sign turned) and the recorded rows against the API
    for recorded, what_if in zip(rows[::2], rows[1::2], strict=True):
        assert recorded["data-row"] == what_if["data-row"]
        s, k, g, _ = own[recorded["data-row"]]
        assert tuple(float(recorded[f"data-{p}"]) for p in ("surrogate", "kl", "total")) == (s, k, g)
        ws, wk, wg = (float(what_if[f"data-{p}"]) for p in ("surrogate", "kl", "total"))
        assert abs(ws + wk - wg) <= 1e-12 and math.copysign(1, g) * wg <= 0  # turned, or stopped (0)
