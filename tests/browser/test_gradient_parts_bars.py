"""∂loss/∂log π in its two parts, drawn (issue 32), in Chromium at a phone's, a laptop's and a desktop's
size: on the toy's reference step, the tiny LM's KL step, a record's KL step and its what-if, the
stacked bars fit their column (no sideways scroll at 390 px, the chart inside the viewport's width), its
text stays readable (≥ 11 px rendered, as test_layout.py asks of every text), and a clipped row shows a KL bar and no surrogate bar.
Screenshots: test-output/screenshots/gradient-parts/<page>-<size>.png."""
from __future__ import annotations

import json

import httpx
import pytest
from browser_helpers import wait_settled
from paths import ROOT
from record_factory import make_record

pytestmark = pytest.mark.browser

SHOTS = ROOT / "test-output" / "screenshots" / "gradient-parts"
SIZES = {"phone": (390, 844), "laptop": (1280, 720), "desktop": (1920, 1080)}
CHART = '[data-chart="gradient-parts"]'
GEOMETRY = """(fig) => { const r = fig.getBoundingClientRect();
  const sizes = [...fig.querySelectorAll('svg text')].map(t => t.getBoundingClientRect().height);
  const clipped = [...fig.querySelectorAll('.parts-row.is-clipped')].map(
      g => [...g.querySelectorAll('[data-part]')].map(p => p.dataset.part + ':' + p.getBoundingClientRect().width));
  return {left: r.left, right: r.right, vw: window.innerWidth,
          sideways: document.scrollingElement.scrollWidth > window.innerWidth,
          smallest: Math.min(...sizes), clipped}; }"""


@pytest.fixture(scope="module")
def base_url(repo_base_url) -> str:
    return repo_base_url


@pytest.fixture(scope="module")
def pages(base_url) -> dict[str, str]:
    raw = make_record(seed=3, groups=2, size=4, lengths=(40, 300), packed=True)
    r = httpx.post(base_url + "/api/walkthroughs", timeout=120,
                   files={"file": ("parts.grpo-step.json", json.dumps(raw).encode(), "application/json")})
    assert r.status_code in (200, 201), r.text
    wid = r.json()["id"]
    urls = {"toy-reference": "/walkthroughs/toy_grpo/steps/reference",
            "tiny-lm-kl": "/walkthroughs/tiny_lm_grpo/steps/kl",
            "record-kl": f"/walkthroughs/{wid}/steps/kl",
            "record-what-if": f"/walkthroughs/{wid}/steps/loss?preset=dapo"}
    for url in urls.values():  # computed once here (the tiny LM's step takes seconds), so a page loads at once
        assert httpx.get(base_url + url, timeout=300).status_code == 200, url
    return urls


@pytest.mark.parametrize("size", SIZES)
def test_the_bars_fit_and_show_the_kl_part_on_clipped_rows(make_context, pages, size):
    SHOTS.mkdir(parents=True, exist_ok=True)
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    for name, url in pages.items():
        page.goto(url)
        wait_settled(page)
        fig = page.locator(CHART)
        assert fig.count() == 1, name
        fig.scroll_into_view_if_needed()
        g = fig.evaluate(GEOMETRY)
        assert not g["sideways"], (name, size, g)
        assert g["left"] >= 0 and g["right"] <= g["vw"], (name, size, g)
        assert g["smallest"] >= 10.8, (name, size, g)  # the house rule (test_layout.py): chart text ≥ 11 px
        if name != "record-what-if":  # there the recorded rows may be clipped, the what-if ones not
            assert g["clipped"], name
            for parts in g["clipped"]:  # only a KL bar, and wide enough to see
                assert len(parts) == 1 and parts[0].startswith("kl:") and float(parts[0][3:]) >= 3, (name, parts)
        page.screenshot(path=str(SHOTS / f"{name}-{size}.png"))
