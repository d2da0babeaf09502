"""The tiny-LM walkthrough's pages and its token JSON API, through TestClient."""
from __future__ import annotations

import gzip

import pytest
from bs4 import BeautifulSoup
from paths import ROOT

from app.views.numbers import readout

HX = {"HX-Request": "true"}
BASE = "/walkthroughs/tiny_lm_grpo"
API = "/api/walkthroughs/tiny_lm_grpo/step"
STEPS = ("sample", "rewards", "advantages", "ratio", "kl", "aggregation", "update")
DETAIL = {"sample": ["#detail-sample"], "rewards": ["#detail-rewards"], "advantages": ["#detail-rewards"],
          "ratio": ["#detail-ratio"], "kl": ["#detail-kl"],
          "aggregation": ["#detail-aggregation", "#detail-length-bias"], "update": ["#detail-update"]}
GZIP_LIMIT = 100_000
SIZES: dict[str, tuple[int, int]] = {}


@pytest.fixture(scope="module")
def client(make_client):
    return make_client(walkthroughs_dir=ROOT / "walkthroughs", follow_redirects=False)


def soup(response):
    return BeautifulSoup(response.text, "html.parser")


@pytest.mark.parametrize("step", STEPS)
def test_each_step_has_the_token_panel_and_its_detail(client, step):
    r = client.get(f"{BASE}/steps/{step}")
    assert r.status_code == 200, r.text[:500]
    page = soup(r)
    assert page.select_one("#token-panel") is not None
    assert page.select_one(".view-content")["data-step-id"] == step
    for sel in DETAIL[step]:
        assert page.select_one(sel) is not None, (step, sel)
    assert page.select_one("#token-form") is not None
    assert len(page.select("#token-panel .completion")) == 8
    raw = r.content
    packed = len(gzip.compress(raw))
    SIZES[step] = (len(raw), packed)
    print(f"{step}: {len(raw)} bytes, gzip {packed} bytes")
    assert packed <= GZIP_LIMIT, (step, packed)


def test_gzip_sizes_report(client, capsys):
    for step in STEPS:
        if step not in SIZES:
            raw = client.get(f"{BASE}/steps/{step}").content
            SIZES[step] = (len(raw), len(gzip.compress(raw)))
    with capsys.disabled():
        print("\ntiny_lm_grpo page sizes (raw / gzip bytes):")
        for step, (raw, packed) in SIZES.items():
            print(f"  {step:12s} {raw:8d} / {packed:7d}")
    assert max(p for _, p in SIZES.values()) <= GZIP_LIMIT


def test_walkthrough_root_opens_a_step(client):
    r = client.get(BASE)
    assert r.status_code in (200, 303, 307), r.status_code


def test_unknown_query_keys_redirect_to_canonical(client):
    r = client.get(f"{BASE}/steps/ratio?bogus=1")
    assert r.status_code == 303
    assert r.headers["location"] == f"{BASE}/steps/ratio"
    r = client.get(f"{BASE}/steps/ratio?metric=kl&bogus=1")
    assert r.status_code == 303 and r.headers["location"] == f"{BASE}/steps/ratio?metric=kl"


def test_out_of_range_group_size_is_refused_beside_the_field(client):
    r = client.get(f"{BASE}/steps/sample?group_size=99")
    assert r.status_code == 422
    page = soup(r)
    error = page.select_one("#te-group_size")
    assert error is not None and error.get_text(strip=True)
    field = page.select_one("#t-group_size")
    assert field["value"] == "99" and field["aria-invalid"] == "true"
    assert "te-group_size" in field["aria-describedby"]
    assert page.select_one("#token-panel") is not None  # the default step still shows
    assert page.select_one("details#change-numbers").has_attr("open")  # the refusal is not folded away


def test_refusal_as_htmx_swaps_only_the_form(client):
    r = client.get(f"{BASE}/steps/sample?group_size=99", headers=HX)
    assert r.status_code == 422
    assert r.headers["hx-retarget"] == "#token-form"
    assert r.headers["hx-reswap"] == "outerHTML"
    page = soup(r)
    assert page.select_one("html") is None and page.select_one("#token-panel") is None
    assert page.select_one("form#token-form #te-group_size") is not None


def test_metric_tab_is_marked_current(client):
    page = soup(client.get(f"{BASE}/steps/sample?metric=ratio"))
    current = page.select('.metric-tab[aria-current="true"]')
    assert [a.get_text(strip=True) for a in current] == ["ratio ρ"]
    default = soup(client.get(f"{BASE}/steps/update"))
    assert [a.get_text(strip=True) for a in default.select('.metric-tab[aria-current="true"]')] == ["Δ log π"]
    # the first step has introduced one strip only: nothing to switch to (issue 20)
    assert soup(client.get(f"{BASE}/steps/sample")).select(".metric-tab") == []


def test_update_step_selects_the_softmax_by_default(client):
    # the update step's saved selection is this node: naming it again is not canonical
    r = client.get(f"{BASE}/steps/update?node=softmax@policy.blocks.1.attention%230")
    assert r.status_code == 303 and r.headers["location"] == f"{BASE}/steps/update"
    page = soup(client.get(f"{BASE}/steps/update"))
    assert page.select_one("svg.attention-map") is not None


def test_attention_map_for_a_block_softmax(client):
    url = f"{BASE}/steps/ratio?node=softmax@policy.blocks.1.attention%230"
    r = client.get(url)
    assert r.status_code == 200, r.text[:500]
    page = soup(r)
    svg = page.select_one("svg.attention-map")
    assert svg is not None and svg.select("rect.att-cell")
    assert "block 1" in page.select_one("#attention-title").get_text()
    links = page.select(".attention-choice a")
    completions = [a for a in links if a.get_text(strip=True).startswith("#")]
    heads = [a for a in links if not a.get_text(strip=True).startswith("#")]
    assert len(completions) == 8 and len(heads) >= 1
    assert all("completion=" in a["href"] or i == 0 for i, a in enumerate(completions))
    r = client.get(url + "&completion=99")
    assert r.status_code == 404
    r = client.get(url + "&head=99")
    assert r.status_code == 404


def test_api_matches_the_page(client):
    page = soup(client.get(f"{BASE}/steps/aggregation"))
    r = client.get(API + "?step=aggregation")
    assert r.status_code == 200
    body = r.json()
    loss_line = page.select_one(".token-loss").get_text(" ", strip=True)
    loss_num = page.select_one(".token-loss .num")
    if loss_num is not None and loss_num.get("data-value"):
        assert float(loss_num["data-value"]) == body["loss"]
    else:
        assert readout(body["loss"]) in loss_line
    shown = ["".join(t.select_one(".tok-text").get_text() for t in li.select(".tok"))
             for li in page.select("#token-panel .completion")]
    assert shown == ["".join(t["text"] for t in c["tokens"]) for c in body["completions"]]
    rewards = soup(client.get(f"{BASE}/steps/rewards"))
    assert [c.get_text() for c in rewards.select("#detail-rewards td code")] == [c["text"] for c in body["completions"]]
    assert body["prompt"]["text"] == page.select_one(".prompt-text").get_text()


def test_api_node_returns_full_values(client):
    r = client.get(API + "?node=policy.lm_head")
    assert r.status_code == 200
    node = r.json()["nodes"]["policy.lm_head"]
    shape = node["shape"]
    assert shape == [8, 17, 28]

    def dims(v):
        return [len(v), *dims(v[0])] if isinstance(v, list) else []
    assert dims(node["values"]) == shape
    summary = client.get(API).json()["nodes"]["policy.lm_head"]
    assert summary["shape"] == shape


def test_token_aria_label_has_its_ratio(client):
    r = client.get(API)
    token = r.json()["completions"][0]["tokens"][0]
    page = soup(client.get(f"{BASE}/steps/ratio"))
    first = page.select_one("#token-panel .completion .tok")
    assert f"ρ {readout(token['ratio'])}" in first["aria-label"]
    assert first["aria-label"].startswith(f"token {token['text']}:")
    assert first["tabindex"] == "0"


def test_the_switch_starts_each_walkthrough_at_step_1(client):
    page = soup(client.get("/walkthroughs/toy_grpo/steps/advantages"))
    assert page.select_one("#token-panel") is None
    assert page.select_one('.graph [data-node-id="advantages"]') is not None
    switch = page.select_one("nav.walkthrough-switch")
    hrefs = [a["href"] for a in switch.select("a")]
    assert "/walkthroughs/toy_grpo/steps/policy" in hrefs and f"{BASE}/steps/sample" in hrefs
    assert switch.select_one('a[aria-current="page"]')["href"] == "/walkthroughs/toy_grpo/steps/policy"
    tiny = soup(client.get(f"{BASE}/steps/sample")).select_one("nav.walkthrough-switch a[aria-current='page']")
    assert tiny["href"] == f"{BASE}/steps/sample"


def test_the_last_step_leads_on_to_the_other_walkthrough(client):
    last = soup(client.get("/walkthroughs/toy_grpo/steps/reference"))
    nxt = last.select_one("a#next-step")
    assert nxt["href"] == f"{BASE}/steps/sample" and "Next:" in nxt.get_text()
    assert last.select_one("#leads-on a[href='#process-panel']") is not None
    # and on, never back to the first walkthrough (issue 49): the real model next, or the reader's own run
    on = soup(client.get(f"{BASE}/steps/update")).select_one("a#next-step")
    assert on["href"] in ("/walkthroughs/smollm_grpo/steps/sample", "/walkthroughs/new"), on["href"]


def test_walkthroughs_page_lists_every_featured_one_with_sentences(client):
    from app.house import registry
    r = client.get("/walkthroughs")
    assert r.status_code == 200
    text = soup(r).get_text(" ", strip=True)
    featured = {f.walkthrough_id: f for f in registry().featured}
    assert list(featured) == ["toy_grpo", "tiny_lm_grpo", "smollm_grpo"]
    for wid in featured:
        title, sentence = featured[wid].headline, featured[wid].teaches
        assert title in text and sentence in text, wid
        assert f'href="/walkthroughs/{wid}"' in r.text


def test_api_lists_tiny_lm_runnable(client):
    body = client.get("/api/walkthroughs").json()
    items = body if isinstance(body, list) else next(v for v in body.values() if isinstance(v, list))
    tiny = next(w for w in items if w.get("id") == "tiny_lm_grpo")
    assert tiny["runnable"] is True


def test_step_one_names_the_second_script_with_a_true_example(client):
    """The second script appears in step 1's tokens: its point says what it is, and its example is true."""
    from app.kinds.tiny_lm.domain.arith_task import read_number

    point = soup(client.get("/walkthroughs/tiny_lm_grpo/steps/sample")).select_one("#step-point").get_text(" ")
    assert "a–j for 0–9" in point and "f+j=be is 5+9=14" in point
    assert (read_number("f"), read_number("j"), read_number("be")) == (5, 9, 14)
