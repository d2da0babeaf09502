"""The control at the toy's step figures (issue 32, "Direct manipulation where it teaches"): a change
of ε, β or the rewards asks the step's own URL for the figure's body alone (HX-Target), and the numbers
that body prints equal an independent float64 computation (tests/grpo_reference.py) from the same
log-probabilities. ε and β are the shown update's only (step_clip_epsilon, step_beta): the group and its
ratios are the default page's exactly. The fragment is only the figure (no page, no graph), carries
HX-Replace-Url and, out of band, the readout and the full form's field (rewards) or the note beside it
(ε, β); a refused value changes nothing but its line."""
from __future__ import annotations

import math
import time
from urllib.parse import urlencode

import grpo_reference as ref
import pytest
from bs4 import BeautifulSoup
from runs import start_default_runs

from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.step import run_grpo_step
from app.kinds.toy.views.figure_control import FIGURE_BODY_ID, MAX_EDITABLE_REWARDS

STEP = "/walkthroughs/toy_grpo/steps/"
FIGURE = {"HX-Request": "true", "HX-Target": FIGURE_BODY_ID}
TOL = 1e-9  # the table's data-value is repr(float): exact; the reference differs by rounding only


@pytest.fixture(scope="module")
def client(make_client):
    return make_client(follow_redirects=False)


def figure(client, step: str, query: list[tuple[str, str]] | dict[str, str]):
    r = client.get(f"{STEP}{step}?{urlencode(query)}", headers=FIGURE)
    assert r.status_code == 200, r.text[:500]
    return r, BeautifulSoup(r.text, "html.parser")


def inputs(params: GRPOParams):
    """The engine's log-probabilities of the shown group (the history replayed to reach them is the
    engine's), and its rewards: what the reference computes everything else from."""
    run = run_grpo_step.__wrapped__(params, "cpu")
    return run.samples


def reference_rows(params: GRPOParams, samples):
    c = params.shown_conventions().model_dump()  # the shown update's: step_clip_epsilon / step_beta in force
    loss, rows = ref.grpo_loss([s["logp"] for s in samples], [s["logp_old"] for s in samples],
                               [s["logp_ref"] for s in samples], [float(s["reward"]) for s in samples],
                               **ref.conventions_kwargs(c))
    return rows, ref.ratio_grads(rows)


def column(soup, name: str) -> list[float]:
    """One column of the figure's group table, by its header's data-column, as exact data-values."""
    table = soup.select_one("#story-figure-body table.group")
    heads = [th.get("data-column") for th in table.select("thead th")]
    at = heads.index(name)
    return [float(tr.find_all(["th", "td"])[at].select_one("[data-value]")["data-value"])
            for tr in table.select("tbody tr")]


def close(got: float, want: float, tol: float = TOL) -> bool:
    return math.isclose(got, want, rel_tol=tol, abs_tol=tol)


def only_the_figure(r, soup, canonical: str) -> None:
    assert r.headers["HX-Replace-Url"] == canonical
    assert "hx-target" in r.headers["vary"].lower()
    text = r.text
    assert "<html" not in text and "<body" not in text and "<head" not in text
    assert soup.select_one("#graph-stage, .graph-frame, .graph, #param-form, #step-panel, #figure-control") is None
    tops = [el for el in soup.contents if getattr(el, "name", None)]
    assert tops[0]["id"] == FIGURE_BODY_ID and "hx-swap-oob" not in tops[0].attrs
    assert all(el.get("hx-swap-oob") == "true" for el in tops[1:]), [el.get("id") for el in tops]


@pytest.mark.parametrize("eps", ["0.1", "0.3"])
def test_clip_figure_for_eps_equals_the_reference(client, eps):
    """The slider sets ε of the shown update only: the figure shows the default page's very ratios (the
    history is replayed with clip_epsilon), the band 1 ± ε of the new value across them, and the clipped
    objective of the reference with that ε on those ratios."""
    r, soup = figure(client, "clip", {"step_clip_epsilon": eps})
    only_the_figure(r, soup, f"{STEP}clip?step_clip_epsilon={eps}")
    _, default = figure(client, "clip", {})
    assert column(soup, "ratio") == column(default, "ratio")  # exactly: the same group, the same policy
    assert column(soup, "advantage") == column(default, "advantage")
    params = GRPOParams(step_clip_epsilon=float(eps))
    assert params.shown_conventions().clip_epsilon_high == float(eps)  # not set: the band's top follows ε
    assert params.clip_epsilon == params.clip_epsilon_high == 0.2  # the history's
    samples = inputs(GRPOParams())
    assert [s["ratio"] for s in inputs(params)] == [s["ratio"] for s in samples]
    rows, grads = reference_rows(params, samples)
    for name, want in (("ratio", [x["ratio"] for x in rows]), ("clipped", [x["clipped"] for x in rows]),
                       ("advantage", [x["advantage"] for x in rows]), ("ratio_grad", grads)):
        got = column(soup, name)
        assert len(got) == len(want) == params.group_size
        assert all(close(g, w) for g, w in zip(got, want, strict=True)), (name, got, want)
    # the clip marks: a row is marked clipped exactly where the reference's clip binds
    marked = [bool(tr.select_one(".clip-mark")) for tr in soup.select("#story-figure-body table.group tbody tr")]
    assert marked == [x["clip_active"] for x in rows]
    # the band drawn and named: [1 - ε, 1 + ε] of the shown update
    low, high = 1 - float(eps), 1 + float(eps)
    labels = [t.get_text() for t in soup.select("#story-figure-body .band-label")]
    assert labels == [f"1−ε = {low:g}", f"1+ε = {high:g}"]
    # the inspector (the step selects `clipped`: its own clip chart) comes out of band with the same band
    inspector = soup.select_one("section#inspector[hx-swap-oob=true]")
    assert [t.get_text() for t in inspector.select(".band-label")] == labels
    assert f"clip range [{low:g}, {high:g}]" in soup.select_one("#story-figure-body figcaption").get_text()
    # out of band: the readout names both values; the full form's clip ε field (the history's) is not
    # replaced, the note beside it is, with the hidden input that keeps the override on Recompute
    assert (soup.select_one("#figure-control-value").get_text()
            == f"ε = {eps} at this update (earlier updates: 0.2): band [{low:g}, {high:g}]")
    assert soup.select_one("#field-clip_epsilon") is None
    beside = soup.select_one("#step-override-clip_epsilon[hx-swap-oob=true]")
    assert beside.select_one("input[type=hidden][name=step_clip_epsilon]")["value"] == eps
    assert f"ε = {eps} for the shown update only" in beside.get_text()
    # the inspector's conventions lines say which ε the shown update used, and which the history
    assert (f"At the shown update only: ε = {eps} (the earlier updates: 0.2)."
            in inspector.select_one("#conventions-line").get_text())
    assert f"clip: ρ kept in [{low:g}, {high:g}]" in inspector.select_one("#conventions-in-force").get_text()
    assert soup.select_one("#figure-control-error").get_text() == ""


def test_the_two_eps_figures_differ(client):
    _, low = figure(client, "clip", {"step_clip_epsilon": "0.1"})
    _, high = figure(client, "clip", {"step_clip_epsilon": "0.3"})
    assert low.select_one(".clip-band")["width"] != high.select_one(".clip-band")["width"]
    assert column(low, "clipped") != column(high, "clipped")
    assert column(low, "ratio") == column(high, "ratio")


def test_the_form_keeps_setting_the_history(client):
    """The page with the figure's ε: the form's clip ε field still holds the history's (0.2), carries the
    shown update's as a hidden input beside it with a note; without an override the note is empty."""
    page = BeautifulSoup(client.get(f"{STEP}clip?step_clip_epsilon=0.3").text, "html.parser")
    assert page.select_one("#p-clip_epsilon")["value"] == "0.2"
    beside = page.select_one("#param-form #field-clip_epsilon #step-override-clip_epsilon")
    assert beside.select_one("input[name=step_clip_epsilon]")["value"] == "0.3"
    assert "this field sets the earlier updates" in beside.get_text()
    assert page.select_one("#fc-step_clip_epsilon")["value"] == "0.3"
    plain = BeautifulSoup(client.get(f"{STEP}clip").text, "html.parser")
    assert plain.select_one("#step-override-clip_epsilon").decode_contents() == ""
    assert plain.select_one("#step-override-beta").decode_contents() == ""
    # the full form's clip_epsilon replays the history: another group (all answer 2 at the defaults)
    _, history = figure(client, "clip", {"clip_epsilon": "0.3"})
    _, default = figure(client, "clip", {})
    assert column(history, "ratio") != column(default, "ratio")


def test_a_refused_override_is_named_beside_the_field(client):
    """step_clip_epsilon out of range (a URL typed by hand): the 422 form names it beside clip ε and does not
    carry it, so Recompute drops it."""
    r = client.get(f"{STEP}clip?step_clip_epsilon=2")
    assert r.status_code == 422
    beside = BeautifulSoup(r.text, "html.parser").select_one("#step-override-clip_epsilon")
    assert beside.select_one("input") is None
    assert beside.select_one("#e-step_clip_epsilon[role=alert]").get_text().startswith(
        "step_clip_epsilon = 2 (the figure's ε for the shown update) was refused: ")


def test_eps_high_set_apart_stays_while_eps_moves(client):
    """A band top the URL (or DAPO's preset) sets stays: the control's form carries it as a hidden input."""
    page = BeautifulSoup(client.get(f"{STEP}clip?clip_epsilon_high=0.28").text, "html.parser")
    hidden = {i["name"]: i["value"] for i in page.select("#figure-control input[type=hidden]")}
    assert hidden == {"clip_epsilon_high": "0.28"}
    assert "stays at 1 + ε_high = 1.28" in page.select_one("#figure-control-note").get_text()
    r, soup = figure(client, "clip", {"step_clip_epsilon": "0.1", "clip_epsilon_high": "0.28"})
    assert [t.get_text() for t in soup.select("#story-figure-body .band-label")] == ["1−ε = 0.9", "1+ε_high = 1.28"]
    params = GRPOParams(step_clip_epsilon=0.1, clip_epsilon_high=0.28)
    rows, _ = reference_rows(params, inputs(params))
    assert all(close(g, w["clipped"]) for g, w in zip(column(soup, "clipped"), rows, strict=True))
    dapo = BeautifulSoup(client.get(f"{STEP}clip?preset=dapo").text, "html.parser")
    assert {i["name"]: i["value"] for i in dapo.select("#figure-control input[type=hidden]")} == {"preset": "dapo"}
    assert "stays at 1 + ε_high = 1.28" in dapo.select_one("#figure-control-note").get_text()
    _, moved = figure(client, "clip", {"preset": "dapo", "step_clip_epsilon": "0.1"})
    assert [t.get_text() for t in moved.select("#story-figure-body .band-label")] == ["1−ε = 0.9", "1+ε_high = 1.28"]


@pytest.mark.parametrize("beta", ["0", "0.1", "0.3"])
def test_reference_figure_for_beta_equals_the_reference(client, beta):
    r, soup = figure(client, "reference", {"step_beta": beta})
    only_the_figure(r, soup, f"{STEP}reference" + ("" if beta == "0.04" else f"?step_beta={beta}"))
    _, default = figure(client, "reference", {})
    assert column(soup, "ratio") == column(default, "ratio")  # the same group: only the KL weight moved
    assert column(soup, "divergence") == column(default, "divergence")
    params = GRPOParams(step_beta=float(beta))
    samples = inputs(GRPOParams())
    c = params.shown_conventions().model_dump()
    want_s, want_k = ref.token_gradient_parts([[(s["logp"], s["logp_old"], s["logp_ref"])] for s in samples],
                                              [float(s["reward"]) for s in samples], c)
    bars = soup.select("#story-figure-body [data-chart=gradient-parts] .parts-row")
    assert len(bars) == params.group_size
    for i, bar in enumerate(bars):
        assert close(float(bar["data-surrogate"]), want_s[i][0]), i
        assert close(float(bar["data-kl"]), want_k[i][0]), i
    if beta == "0":
        assert all(float(bar["data-kl"]) == 0 for bar in bars)
    else:
        assert any(float(bar["data-kl"]) != 0 for bar in bars)
    rows, _ = reference_rows(params, samples)
    assert all(close(g, w["divergence"]) for g, w in zip(column(soup, "divergence"), rows, strict=True))
    assert all(close(g, w["objective"]) for g, w in zip(column(soup, "objective"), rows, strict=True))
    assert soup.select_one("#figure-control-value").get_text() == f"β = {beta} at this update (earlier updates: 0.04)"
    assert soup.select_one("#field-beta") is None
    assert soup.select_one("#step-override-beta[hx-swap-oob] input[name=step_beta]")["value"] == beta
    # the step links follow, so Previous keeps the new β (the toy's last step: Next leaves the walkthrough)
    prev = soup.select_one("nav#step-nav[hx-swap-oob] a#prev-step")
    assert prev["href"] == prev["hx-get"] == f"{STEP}clip" + ("" if beta == "0.04" else f"?step_beta={beta}")


REWARDS = ["1", "0", "0.5", "0", "2", "0", "1", "-1"]


def test_advantages_figure_for_rewards_equals_the_reference(client):
    """One input per completion sends `rewards` once each; they join into the URL's one comma list."""
    r, soup = figure(client, "advantages", [("rewards", v) for v in REWARDS])
    only_the_figure(r, soup, f"{STEP}advantages?{urlencode({'rewards': ','.join(REWARDS)})}")
    rewards = [float(v) for v in REWARDS]
    want = ref.advantages(rewards, GRPOParams().advantage_epsilon)
    assert column(soup, "reward") == rewards
    assert all(close(g, w) for g, w in zip(column(soup, "advantage"), want, strict=True))
    bars = soup.select("#story-figure-body .chart-advantages .adv-bar")
    assert [("is-negative" in b["class"]) for b in bars] == [a < 0 for a in want]
    assert soup.select_one("#field-rewards input#p-rewards")["value"] == ",".join(REWARDS)
    assert soup.select_one("#figure-control-value") is None  # the inputs are their own readout


def test_the_page_shows_each_control_with_the_rest_of_the_view_hidden(client):
    page = BeautifulSoup(client.get(f"{STEP}advantages?seed=3&node=policy.logits").text, "html.parser")
    form = page.select_one("#story-figure > form#figure-control")
    assert form["action"] == form["hx-get"] == f"{STEP}advantages" and form["method"] == "get"
    assert form["hx-target"] == f"#{FIGURE_BODY_ID}" and "input changed delay:150ms" in form["hx-trigger"]
    assert {i["name"]: i["value"] for i in form.select("input[type=hidden]")} == {"node": "policy.logits", "seed": "3"}
    steppers = form.select("input[type=number][name=rewards]")
    assert len(steppers) == 8 and len({s["id"] for s in steppers}) == 8
    assert form.select_one("noscript") is not None and "Apply" in form.select_one("noscript").decode_contents()
    # the control sits outside the part a change swaps, so it keeps focus while used
    assert page.select_one(f"#{FIGURE_BODY_ID} #figure-control") is None
    clip = BeautifulSoup(client.get(f"{STEP}clip").text, "html.parser")
    slider = clip.select_one("#figure-control input[type=range]#fc-step_clip_epsilon")
    assert (slider["name"], slider["value"], slider["min"], slider["max"]) == ("step_clip_epsilon", "0.2", "0.01",
                                                                                "0.6")
    assert clip.select_one("#figure-control-value").get_text() == "ε = 0.2: band [0.8, 1.2]"
    ref_page = BeautifulSoup(client.get(f"{STEP}reference").text, "html.parser")
    assert (ref_page.select_one("#fc-step_beta")["name"], ref_page.select_one("#fc-step_beta")["value"]) == \
        ("step_beta", "0.04")
    # the slider starts at the shown update's value, whatever the history's: the full form's β is 0.1 here
    history = BeautifulSoup(client.get(f"{STEP}reference?beta=0.1").text, "html.parser")
    assert history.select_one("#fc-step_beta")["value"] == "0.1"
    assert {i["name"]: i["value"] for i in history.select("#figure-control input[type=hidden]")} == {"beta": "0.1"}
    assert BeautifulSoup(client.get(f"{STEP}policy").text, "html.parser").select_one("#figure-control") is None


def test_no_control_where_it_would_not_follow(client):
    """A training path's stage has its own settings; Compare's side B would not follow; a big group's
    rewards are the full form's."""
    start_default_runs(client.app)  # the path's run, as the server queues it at start-up (a GET never does)
    for _ in range(600):
        if client.get(f"{STEP}clip?process=r1").status_code == 200:
            break
        time.sleep(0.05)
    for url in (f"{STEP}clip?process=r1", f"{STEP}clip?vs_preset=trl",
                f"{STEP}advantages?group_size={MAX_EDITABLE_REWARDS + 1}"):
        page = BeautifulSoup(client.get(url).text, "html.parser")
        assert page.select_one("#story-figure") is not None, url
        assert page.select_one("#figure-control") is None, url


def test_a_refused_change_swaps_nothing_but_its_line(client):
    typed = [("rewards", v) for v in REWARDS[:-1]] + [("rewards", "")]  # the last one being retyped
    r = client.get(f"{STEP}advantages?{urlencode(typed)}", headers=FIGURE)
    assert r.status_code == 422
    assert r.headers["HX-Reswap"] == "none" and "HX-Replace-Url" not in r.headers
    soup = BeautifulSoup(r.text, "html.parser")
    line = soup.select_one("#figure-control-error[hx-swap-oob=true]")
    assert line is not None and line.get_text().startswith("rewards: ")
    assert soup.select_one(f"#{FIGURE_BODY_ID}") is None and soup.select_one("[aria-invalid]") is None


def test_the_figure_and_the_view_are_cached_apart(client):
    """One URL, two answers (the whole view for #view, the figure's body for it): the response cache
    keys on HX-Target, so neither is replayed for the other."""
    url = f"{STEP}clip?clip_epsilon=0.25"
    for _ in range(2):
        view = client.get(url, headers={"HX-Request": "true", "HX-Target": "view"})
        body = client.get(url, headers=FIGURE)
        assert "graph-frame" in view.text and "graph-frame" not in body.text
        assert body.text.lstrip().startswith(f'<div class="story-figure-body" id="{FIGURE_BODY_ID}"')


def test_without_script_apply_reaches_the_canonical_page(client):
    """The no-script Apply sends the form as a plain GET: the page answers with a 303 to its one URL."""
    r = client.get(f"{STEP}advantages?{urlencode([('rewards', v) for v in REWARDS])}")
    assert r.status_code == 303
    assert r.headers["location"] == f"{STEP}advantages?{urlencode({'rewards': ','.join(REWARDS)})}"
    r = client.get(f"{STEP}clip?step_clip_epsilon=0.30")
    assert r.status_code == 303 and r.headers["location"] == f"{STEP}clip?step_clip_epsilon=0.3"
    # back at the history's own ε the override is gone: one canonical URL
    r = client.get(f"{STEP}clip?step_clip_epsilon=0.20")
    assert r.status_code == 303 and r.headers["location"] == f"{STEP}clip"
