"""A recorded GRPO step (the step_record kind, issue 23) in Chromium at a phone's and a laptop's
size: a small record and the issue's scale case (G 16 × 4,096 tokens), uploaded through the API.

Each of the five steps loads with a clean console and no failed or off-site request, its focus
figure mostly in the first view (docs/design.md §1b, the rule test_story.py checks), no sideways
scroll at 390 px; the overview strip moves the token window, the metric tabs switch the number
under each token, the what-if form shows the comparison, whitespace in tokens is visible, and axe
finds nothing serious. Screenshots: test-output/screenshots/record/<record>-<n>-<step>-<size>.png
(first view) and …-full.png (the whole page).
"""
from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from axe_playwright_python.sync_playwright import Axe
from browser_helpers import (
    FOCUS_BOX,
    axe_blocking,
    describe,
    expect_figure_fits,
    expect_headline,
    fills_first_view,
    wait_settled,
)
from paths import ROOT
from playwright.sync_api import Page, expect
from record_factory import make_record

from app.kinds.step_record.views.story import STORIES

pytestmark = pytest.mark.browser

SHOTS = ROOT / "test-output" / "screenshots" / "record"
SIZES = {"phone": (390, 844), "laptop": (1280, 720)}
FIRST_VIEW_SIZES = {**SIZES, "desktop": (1920, 1080)}
STEPS = ("group", "ratio", "kl", "loss", "diagnostics")
RECORDS = {
    "small": lambda: make_record(seed=3, groups=2, size=4, lengths=(40, 300), packed=True),
    # the scale case: one group of 16 completions of 4,096 tokens each
    "g16x4096": lambda: make_record(seed=0, groups=1, size=16, lengths=(4096, 4096), packed=True),
}
NO_SIDEWAYS_SCROLL = "() => document.scrollingElement.scrollWidth <= window.innerWidth"


def upload(base_url: str, name: str, record: dict) -> str:
    body = json.dumps(record).encode()
    r = httpx.post(base_url + "/api/walkthroughs", files={"file": (f"{name}.grpo-step.json", body,
                                                                  "application/json")}, timeout=120)
    assert r.status_code in (200, 201), r.text
    assert r.json()["steps"] == len(STEPS), r.json()
    return r.json()["id"]


@pytest.fixture(scope="module")
def records(base_url) -> dict[str, str]:
    """Each record uploaded (POST /api/walkthroughs, multipart `file`): name → walkthrough id.

    A framework logs its metrics; these records are given the app's own recomputed ones (from a
    first upload without), so the loss step shows its checks: all agree on the small record, and
    on the large one the logged KL is 0.1% off, so one row disagrees and the causes show."""
    ids = {}
    for name, build in RECORDS.items():
        record = build()
        bare = upload(base_url, name, record)
        metrics = httpx.get(f"{base_url}/api/walkthroughs/{bare}/step", timeout=60).json()["metrics"]
        if name == "g16x4096":
            metrics["kl"] *= 1.001
        ids[name] = upload(base_url, name, {**record, "metrics": metrics})
    return ids


class Requests:
    """Every request of a page: failures, error statuses and any to another host."""

    def __init__(self, page: Page, base_url: str) -> None:
        self.origin = base_url
        self.bad: list[str] = []
        page.on("requestfailed", self.failed)
        page.on("response", lambda res: res.status >= 400 and self.bad.append(f"{res.status}: {res.url}"))
        page.on("request", self.request)

    def failed(self, req) -> None:
        # The browser's own favicon fetch, cut short when a click navigates before it ends, is no failure of the
        # page's (seen once in a clean-clone run); every other failed request is.
        if "/static/favicon" in req.url and "ERR_ABORTED" in str(req.failure):
            return
        self.bad.append(f"failed: {req.url} ({req.failure})")

    def request(self, req) -> None:
        if not (req.url.startswith(self.origin + "/") or req.url.startswith(("data:", "about:", "blob:"))):
            self.bad.append(f"another host: {req.url}")


def step_url(wid: str, step: str, query: str = "") -> str:
    return f"/walkthroughs/{wid}/steps/{step}" + (f"?{query}" if query else "")


def settle(page: Page) -> None:
    wait_settled(page)
    page.wait_for_load_state("load")


def query_of(page: Page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}


def under_each_token(page: Page) -> list[str]:
    return page.locator("#record-tokens .rtok .rn").all_inner_texts()


@pytest.mark.parametrize("size", FIRST_VIEW_SIZES)
@pytest.mark.parametrize("record", RECORDS)
def test_every_step_loads_with_its_figure_in_the_first_view(make_context, base_url, records, record, size):
    SHOTS.mkdir(parents=True, exist_ok=True)
    w, h = FIRST_VIEW_SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    requests = Requests(page, base_url)
    names = {}
    for n, step in enumerate(STEPS, 1):
        page.goto(step_url(records[record], step))
        settle(page)
        expect(page.locator(".view-content")).to_have_attribute("data-step-id", step)
        expect_headline(page, STORIES[step].point)          # the step's point, not the export's title
        box = page.evaluate(FOCUS_BOX)
        assert box is not None, f"{record}/{step}: no data-step-focus or no step point"
        assert fills_first_view(box), f"{record}/{step} at {size}: {box}"
        expect_figure_fits(box, f"{record}/{step} at {size}")
        # next to the point (wide: the figure's column starts right of it) or under it (narrow)
        assert box["top"] >= box["pointBottom"] - 1 or box["left"] >= box["pointRight"] - 1, box
        assert page.evaluate(NO_SIDEWAYS_SCROLL), (record, step, size, page.evaluate(
            "() => [document.scrollingElement.scrollWidth, window.innerWidth]"))
        names[step] = box["name"]
        if step == "loss":  # the checks against the log: every row on the small record agrees
            verdict = page.locator("#record-figure .check-verdict")
            expect(verdict).to_contain_text("✓" if record == "small" else "✗")
            expect(page.locator("#record-checks tbody tr")).not_to_have_count(0)
        page.screenshot(path=str(SHOTS / f"{record}-{n}-{step}-{size}.png"), caret="initial")
        page.screenshot(path=str(SHOTS / f"{record}-{n}-{step}-{size}-full.png"), full_page=True, caret="initial")
    assert not requests.bad, "\n".join(requests.bad)
    assert names == {"group": "record-group", "ratio": "record-tokens", "kl": "record-tokens",
                     "loss": "record-checks", "diagnostics": "record-diagnostics"}


@pytest.mark.parametrize("size", SIZES)
def test_the_strip_moves_the_window_and_the_tabs_switch_the_number(make_context, base_url, records, size):
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    requests = Requests(page, base_url)
    wid = records["g16x4096"]
    page.goto(step_url(wid, "ratio"))
    settle(page)
    title = page.locator("#record-tokens .window-title")
    expect(title).to_contain_text("tokens 1–256 of 4096")
    expect(page.locator("#record-tokens .rtok")).to_have_count(256)
    # the strip: one row per completion, each window of 256 tokens a link
    lines = page.locator("#record-tokens .strip-line")
    expect(lines).to_have_count(16)
    expect(lines.nth(0).locator("a")).to_have_count(16)
    # the current completion's 5th window (tokens 1025–1280)
    lines.nth(0).locator("a").nth(4).locator("rect").click()
    page.wait_for_url(re.compile(r"[?&]at=1024\b"))
    settle(page)
    assert query_of(page).get("at") == "1024"
    expect(title).to_contain_text("tokens 1025–1280 of 4096")
    expect(page.locator('#record-tokens .rtok').first).to_have_attribute("title", re.compile(r"^token 1025 "))
    # another completion's row: the window moves to that completion, at that stretch
    lines.nth(6).locator("a").nth(15).locator("rect").click()
    page.wait_for_url(re.compile(r"[?&]at=3840\b"))
    settle(page)
    assert query_of(page).get("at") == "3840" and query_of(page).get("completion") == "6"
    expect(title).to_contain_text("Completion 6 of group 0: tokens 3841–4096 of 4096")
    expect(page.locator("#record-tokens .strip-line.is-current .strip-label")).to_have_text("#6")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)

    # the metric tabs: the ratio step shows ρ under each token; KL and ∂loss/∂log π replace it
    current = page.locator('.metric-tab[aria-current="true"]')
    expect(current).to_have_text("ratio ρ")
    before = under_each_token(page)
    check_numbers_match_cards(page, "ρ")
    for label, metric, key in (("KL", "kl", "KL"), ("∂loss/∂log π", "grad", "∂loss/∂log π")):
        page.locator(".metric-tab", has_text=re.compile("^" + re.escape(label) + "$")).click()
        page.wait_for_url(re.compile(rf"[?&]metric={metric}\b"))
        settle(page)
        expect(page.locator('.metric-tab[aria-current="true"]')).to_have_text(label)
        expect(page.locator(".metric-explain strong")).to_have_text(label)
        assert query_of(page).get("at") == "3840", page.url  # the window stays where it was
        after = under_each_token(page)
        assert len(after) == len(before) == 256 and after != before, (label, after[:5], before[:5])
        check_numbers_match_cards(page, key)
        before = after
    assert not requests.bad, "\n".join(requests.bad)


def check_numbers_match_cards(page: Page, key: str) -> None:
    """The number under each token is the one its card (title) gives for `key` (✂ aside)."""
    pairs = page.locator("#record-tokens .rtok").evaluate_all(
        "els => els.map(e => [e.querySelector('.rn').textContent, e.getAttribute('title')])")
    for shown, card in pairs[:40]:
        m = re.search(rf"(?:^|, |: ){re.escape(key)} (\S+?)(?:,|$)", card)
        assert m, (key, card)
        assert shown.rstrip("✂") == m.group(1), (key, shown, card)


@pytest.mark.parametrize("size", SIZES)
def test_the_what_if_form_shows_both_conventions_side_by_side(make_context, base_url, records, size):
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    requests = Requests(page, base_url)
    page.goto(step_url(records["g16x4096"], "loss"))
    settle(page)
    expect(page.locator("#record-compare")).to_have_count(0)
    fold = page.locator("details#change-numbers")
    assert fold.evaluate("d => d.open"), "the loss step opens its form"
    form = page.locator("#what-if-form")
    form.get_by_label("Preset").select_option("dr_grpo")
    form.get_by_role("button", name="Compare").click()
    page.wait_for_url(re.compile(r"/steps/loss\?.*preset=dr_grpo"))
    settle(page)
    table = page.locator("#record-compare")
    expect(table).to_be_visible()
    expect(table.locator("thead th")).to_have_text(["", "recorded", "what if"])
    expect(table.locator("tbody tr").first.locator("th")).to_have_text("loss")
    assert table.locator("tbody tr").count() >= 4
    # the what-if is named above the figure, with the way back
    expect(page.locator(".record-conventions")).to_contain_text("What if:")
    expect(page.locator(".record-conventions")).to_contain_text("preset=dr_grpo")
    # under the tokens: the change of each token's push (Δ ∂loss/∂log π), the loss step's default then
    expect(page.locator('.metric-tab[aria-current="true"]')).to_have_text("Δ ∂loss/∂log π")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    page.screenshot(path=str(SHOTS / f"what-if-loss-{size}.png"), caret="initial")
    page.screenshot(path=str(SHOTS / f"what-if-loss-{size}-full.png"), full_page=True, caret="initial")
    page.locator(".record-conventions a", has_text="back to the record's own").click()
    page.wait_for_url(re.compile(r"/steps/loss$"))
    settle(page)
    expect(page.locator("#record-compare")).to_have_count(0)
    assert not requests.bad, "\n".join(requests.bad)


def test_token_text_shows_its_whitespace(page, records):
    page.goto(step_url(records["small"], "ratio"))
    settle(page)
    texts = page.locator("#record-tokens .rtok .rt").all_inner_texts()
    assert texts
    assert "·the" in texts and "↵" in texts and "·" in texts and "→" in texts, sorted(set(texts))
    assert not [t for t in texts if re.search(r"\s", t)], "whitespace that would vanish on screen"
    # the raw text as rendered, not only as the DOM has it: " the" draws the middle dot
    first = page.locator("#record-tokens .rtok .rt", has_text=re.compile(r"^·the$")).first
    expect(first).to_be_visible()
    # the group table's previews show it too
    previews = page.locator("#record-group-table td.preview code")
    page.goto(step_url(records["small"], "group"))
    settle(page)
    assert all("\n" not in t for t in previews.all_inner_texts())
    expect(previews.first).to_contain_text(re.compile("[·↵→]"))


def test_each_finding_links_to_where_the_page_shows_it(page, records):
    """Every "Show it" of the diagnostics opens; the largest KL's lands on the KL step, on the
    completion and the window that hold the token the sentence names."""
    page.goto(step_url(records["g16x4096"], "diagnostics"))
    settle(page)
    links = page.locator("#record-findings a", has_text="Show it")
    assert links.count() >= 5
    for href in links.evaluate_all("els => els.map(e => e.getAttribute('href'))"):
        assert page.request.get(href).status == 200, href
    kl = page.locator("#finding-kl")
    m = re.search(r"\(([^,]+), completion (\d+) of group (\d+), token (\d+)\)", kl.inner_text())
    assert m, kl.inner_text()
    completion, token = int(m.group(2)), int(m.group(4))
    kl.get_by_role("link", name="Show it").click()
    page.wait_for_url(re.compile(r"/steps/kl\?"))
    settle(page)
    start = (token - 1) // 256 * 256
    expect(page.locator("#record-tokens .window-title")).to_contain_text(
        f"Completion {completion} of group 0: tokens {start + 1}–{start + 256} of 4096")
    card = page.locator("#record-tokens .rtok").nth(token - 1 - start)
    expect(card).to_have_attribute("title", re.compile(rf"^token {token} .*KL {re.escape(m.group(1))},"))


@pytest.fixture(scope="module")
def axe() -> Axe:
    return Axe()


@pytest.mark.parametrize("size", SIZES)
def test_axe_finds_no_serious_violations_on_the_record_pages(make_context, axe, records, size):
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    urls = [step_url(records["small"], s) for s in STEPS] + [
        step_url(records["g16x4096"], "ratio", "completion=3&at=2048"),
        step_url(records["g16x4096"], "kl", "metric=entropy"),
        step_url(records["small"], "loss", "preset=dr_grpo"),
        step_url(records["small"], "ratio", "node=python%40ratio%230"),
    ]
    blocking = axe_blocking(page, axe, urls, settle)
    assert not blocking, "\n\n".join(f"{url}\n{describe(vs)}" for url, vs in blocking.items())
