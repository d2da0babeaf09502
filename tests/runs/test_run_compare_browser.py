"""Runs compared (issue 50) in Chromium at 390×844, 1280×720 and 1920×1080: three runs whose configs differ, sent as
archives the way the upload page's "Open a whole run" sends them. Nothing scrolls sideways, the legend and the config
table are in the first view, every chart has one line per run, no console error or CSP violation (the fixture
fails on any), no failed or off-site request. Screenshots: test-output/screenshots/run-compare/<view>-<size>.png."""
from __future__ import annotations

import httpx
import pytest
from compare_fixtures import CONFIGS, run_document, write_run, zipped
from paths import ROOT
from playwright.sync_api import expect
from run_browser import NO_SIDEWAYS_SCROLL, SIZES, bad_requests, shoot, top_in_view

from app.runs.views.run_compare import compare_url

pytestmark = pytest.mark.browser

SHOTS = ROOT / "test-output" / "screenshots" / "run-compare"


@pytest.fixture(scope="module")
def ids(base_url, tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("compare-runs")
    out = []
    for k, config in enumerate(CONFIGS):
        folder = write_run(root / f"run-{k}", run_document(k, extra={"rewards/format/mean": 0.5} if k == 1 else None,
                                                           kl=k != 1), config)
        r = httpx.post(base_url + "/api/runs", content=zipped(folder),
                       headers={"content-type": "application/zip"}, timeout=60)
        assert r.status_code in (200, 201), r.text
        out.append(r.json()["id"])
    return out


@pytest.mark.parametrize("size", SIZES)
def test_the_compare_page_fits_and_names_its_runs(make_context, base_url, ids, size):
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    bad = bad_requests(page, base_url)
    page.goto(compare_url(ids))
    expect(page.locator("h1")).to_have_text("3 runs compared")
    legend = page.locator("#cmp-legend")
    expect(legend).to_be_visible()
    expect(legend.locator("li")).to_have_count(3)
    expect(legend.locator("li").nth(1)).to_contain_text("β 0 · ε 0.28 · loss_type dr_grpo")
    assert top_in_view(page, "#cmp-legend") and top_in_view(page, "#cmp-config-title")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    entropy = page.locator("figure.cmp-chart[data-metric='entropy']")
    expect(entropy.locator("g[data-run] polyline")).to_have_count(3)
    expect(entropy.locator(".cmp-last li")).to_have_count(3)
    assert entropy.locator("svg.cmp-svg").bounding_box()["width"] <= w
    kl = page.locator("figure.cmp-chart[data-metric='kl']")  # run B (β = 0) logged none: said under the chart
    expect(kl.locator("g[data-run] polyline")).to_have_count(2)
    expect(kl.locator(".cmp-absent")).to_have_text("Not logged by run B (TRL logs kl only when β > 0).")
    shoot(page, SHOTS, "three", size)

    page.locator(".cmp-axis a").click()  # to tokens seen
    page.wait_for_url("**x=tokens")
    expect(page.locator(".cmp-axis strong")).to_have_text("tokens seen (num_tokens)")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    assert not bad, bad
