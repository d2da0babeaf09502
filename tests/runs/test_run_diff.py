"""The diff of two recorded steps of a run (issue 34) over HTTP: every number of the page and of its JSON twin
against an independent float64 computation from the two records' raw arrays (ρ = exp(log π − log π_old),
k3 = exp(Δ) − Δ − 1 with Δ = log π_ref − log π, the recorded entropy and advantage, trained-token lengths,
Σ w·r rewards: percentiles by hand, the KS distance by brute force over every value, histogram counts bin by
bin); the prompts both steps share and the tokens whose log π moved; the refusals (404, 422 naming the field);
the explorer's "Compare two recorded steps" form; the shipped example run's steps with and without a prompt in
common."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from bs4 import BeautifulSoup
from record_factory import make_record
from run_fixtures import healthy

from app.runs.domain.two_sample import BINS, TAIL_PERCENTILES, TAIL_SPAN
from app.runs.engine.run_diff import MIN_TOKEN_COUNT
from app.runs.views.run_diff import TOP
from app.views.numbers import significant

TEXTS = [" the", "\n", "<b>", "7", "\t", "ans", " +", "=", "\u200b", "x", "y", "z"]  # by token id
VISIBLE = {" the": "·the", "\n": "↵", "\t": "→", " +": "·+", "\u200b": "\\u200b"}


def synthetic(seed: int, groups: int) -> dict:
    """make_record's record on a 12-token vocabulary (ids repeat, so tokens can be compared), a trained-token
    mask with zeros, and, in the first group, a completion no reward function scored."""
    doc = make_record(seed=seed, groups=groups, size=4, lengths=(4, 14))
    rng = np.random.default_rng(100 + seed)
    for gi, group in enumerate(doc["groups"]):
        for ci, c in enumerate(group["completions"]):
            n = len(c["token_ids"])
            ids = rng.integers(0, len(TEXTS), n)
            c["token_ids"] = [int(t) for t in ids]
            c["tokens"] = [TEXTS[t] for t in ids]
            c["mask"] = [1] * (n - 2) + [0, 0] if ci % 2 else [1] * n
            if gi == 0 and ci == 1:
                c["rewards"] = {"accuracy": None, "format": None}
    return doc


@pytest.fixture
def client(make_client, tmp_path):
    return make_client(data_dir=tmp_path, follow_redirects=False)


@pytest.fixture
def pair(client) -> tuple[str, dict, dict]:
    """A run with steps 3 and 6 recorded: (its id, step 3's record, step 6's)."""
    docs = {3: synthetic(1, 2), 6: synthetic(2, 3)}  # step 6 has a third prompt of its own
    overflow = docs[6]["groups"][1]["completions"][0]  # a ratio of exp(9000): not finite, left out and counted
    overflow["logprobs"][0], overflow["old_logprobs"][0] = -1e-3, -9000.0
    ids = {}
    for step, doc in docs.items():
        r = client.post("/api/walkthroughs", files={"file": (f"s{step}.json", json.dumps(doc), "application/json")})
        assert r.status_code == 201, r.text
        ids[step] = r.json()["id"]
    store = client.app.state.run_store
    ident, _ = store.add(json.dumps(healthy(10)).encode())
    store.link_records(ident, ids)
    return ident, docs[3], docs[6]


# -- the independent computation --------------------------------------------------------------------------------

def rows(doc):
    return [(g["prompt"], c) for g in doc["groups"] for c in g["completions"]]


def trained(c) -> np.ndarray:
    return np.asarray(c.get("mask") or [1] * len(c["token_ids"]), dtype=bool)


def reward(c) -> float:
    scored = [v for v in c["rewards"].values() if v is not None]
    return float(sum(scored)) if scored else math.nan  # reward weights are 1


def raw_values(doc) -> dict[str, np.ndarray]:
    out: dict[str, list[float]] = {k: [] for k in ("ratio", "kl", "entropy", "advantage", "length", "reward")}
    for _, c in rows(doc):
        m = trained(c)
        logp, old, ref = (np.asarray(c[k], dtype=np.float64)[m] for k in ("logprobs", "old_logprobs", "ref_logprobs"))
        with np.errstate(over="ignore"):
            out["ratio"] += list(np.exp(logp - old))
        out["kl"] += list(np.exp(ref - logp) - (ref - logp) - 1)
        out["entropy"] += list(np.asarray(c["entropy"], dtype=np.float64)[m])
        out["advantage"].append(c["advantage"])
        out["length"].append(float(m.sum()))
        if not math.isnan(reward(c)):
            out["reward"].append(reward(c))
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}
    with np.errstate(over="ignore"):
        return {k: v[np.isfinite(v)] for k, v in arrays.items()}


def percentile(x: np.ndarray, p: float) -> float:
    s = sorted(x)
    h = (len(s) - 1) * p / 100
    lo = math.floor(h)
    return s[lo] + (h - lo) * (s[min(lo + 1, len(s) - 1)] - s[lo])


def ks(a: np.ndarray, b: np.ndarray) -> float:
    return max(abs(np.mean(a <= x) - np.mean(b <= x)) for x in np.concatenate([a, b]))


def histogram(a: np.ndarray, b: np.ndarray) -> tuple[list[float], list[int], list[int]]:
    pooled = np.concatenate([a, b])
    lo, hi = pooled.min(), pooled.max()
    p_lo, p_hi = (percentile(pooled, p) for p in TAIL_PERCENTILES)
    if p_hi > p_lo and hi - lo > TAIL_SPAN * (p_hi - p_lo):
        lo, hi = p_lo, p_hi
    if hi == lo:
        lo, hi = lo - max(abs(lo) * 0.05, 0.05), hi + max(abs(hi) * 0.05, 0.05)
    width = (hi - lo) / BINS

    def counts(x):
        out = [0] * BINS
        for v in x:
            out[min(BINS - 1, max(0, int((min(max(v, lo), hi) - lo) // width)))] += 1
        return out

    return [lo + k * width for k in range(BINS + 1)], counts(a), counts(b)


def per_prompt(doc) -> dict[str, tuple[float, float, float]]:
    groups: dict[str, list] = {}
    for g in doc["groups"]:
        rs = [reward(c) for c in g["completions"]]
        scored = [r for r in rs if not math.isnan(r)]
        tied = not scored or all(r == scored[0] for r in scored)
        for c, r in zip(g["completions"], rs, strict=True):
            groups.setdefault(g["prompt"], []).append((r, trained(c).sum(), tied))
    out = {}
    for prompt, items in groups.items():
        scored = [r for r, _, _ in items if not math.isnan(r)]
        out[prompt] = (sum(scored) / len(scored) if scored else math.nan, sum(n for _, n, _ in items) / len(items),
                       sum(t for _, _, t in items) / len(items))
    return out


def token_means(doc) -> dict[int, tuple[int, float]]:
    seen: dict[int, list[float]] = {}
    for _, c in rows(doc):
        for t, lp, kept in zip(c["token_ids"], c["logprobs"], trained(c), strict=True):
            if kept:
                seen.setdefault(t, []).append(lp)
    return {t: (len(v), sum(v) / len(v)) for t, v in seen.items() if len(v) >= MIN_TOKEN_COUNT}


# -- the tests ---------------------------------------------------------------------------------------------------

def test_every_number_of_the_json_twin_is_the_records_own(client, pair):
    ident, doc_a, doc_b = pair
    r = client.get(f"/api/runs/{ident}/diff?a=3&b=6")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["a"]["step"] == 3 and body["b"]["step"] == 6
    assert body["a"]["url"] == f"/walkthroughs/{body['a']['walkthrough']}"
    va, vb = raw_values(doc_a), raw_values(doc_b)
    assert va["reward"].size == 7  # the unscored completion is left out
    for name, q in body["quantities"].items():
        a, b = va[name], vb[name]
        for side, x in (("a", a), ("b", b)):
            s = q[side]
            assert s["count"] == x.size, name
            assert s["mean"] == pytest.approx(x.sum() / x.size, rel=1e-9, abs=1e-12), name
            for key, p in (("p5", 5), ("p50", 50), ("p95", 95)):
                assert s[key] == pytest.approx(percentile(x, p), rel=1e-9, abs=1e-12), (name, key)
            assert (s["min"], s["max"]) == pytest.approx((x.min(), x.max()), rel=1e-12), name
        assert q["mean_shift"] == pytest.approx(b.mean() - a.mean(), rel=1e-9, abs=1e-12), name
        assert q["median_shift"] == pytest.approx(percentile(b, 50) - percentile(a, 50), rel=1e-9, abs=1e-12), name
        assert q["ks"] == pytest.approx(ks(a, b), abs=1e-12), name
        edges, ca, cb = histogram(a, b)
        assert q["histogram"]["edges"] == pytest.approx(edges, rel=1e-9, abs=1e-12), name
        assert (q["histogram"]["a"], q["histogram"]["b"]) == (ca, cb), name
        assert q["left_out"] == {"a": 0, "b": 1 if name == "ratio" else 0}
    assert 0 < body["quantities"]["kl"]["ks"] < 1  # a real comparison, not a constant


def test_the_prompts_both_steps_share_and_the_tokens_that_moved(client, pair):
    ident, doc_a, doc_b = pair
    body = client.get(f"/api/runs/{ident}/diff?a=3&b=6").json()
    pa, pb = per_prompt(doc_a), per_prompt(doc_b)
    both = [p for p in pa if p in pb]
    assert (body["prompts"]["matched"], body["prompts"]["only_a"], body["prompts"]["only_b"]) == (2, 0, 1)
    for k, key in enumerate(("reward", "length", "tied")):
        got = body["prompts"][key]
        assert sorted(r["prompt"] for r in got) == sorted(both)
        for row in got:
            assert row["a"] == pytest.approx(pa[row["prompt"]][k], rel=1e-12)
            assert row["b"] == pytest.approx(pb[row["prompt"]][k], rel=1e-12)
            assert row["change"] == pytest.approx(pb[row["prompt"]][k] - pa[row["prompt"]][k], rel=1e-9, abs=1e-12)
        changes = [abs(r["change"]) for r in got]
        assert changes == sorted(changes, reverse=True), key
    ta, tb = token_means(doc_a), token_means(doc_b)
    shared = {t: tb[t][1] - ta[t][1] for t in ta.keys() & tb.keys()}
    assert body["tokens"]["compared"] == len(shared) > 4
    rises = sorted((t for t, d in shared.items() if d > 0), key=lambda t: -shared[t])[:TOP]
    falls = sorted((t for t, d in shared.items() if d < 0), key=lambda t: shared[t])[:TOP]
    assert [r["id"] for r in body["tokens"]["rises"]] == rises
    assert [r["id"] for r in body["tokens"]["falls"]] == falls
    for row in body["tokens"]["rises"] + body["tokens"]["falls"]:
        t = row["id"]
        assert row["text"] == TEXTS[t]
        assert (row["count_a"], row["count_b"]) == (ta[t][0], tb[t][0])
        assert row["mean_logprob_a"] == pytest.approx(ta[t][1], rel=1e-12)
        assert row["change"] == pytest.approx(shared[t], rel=1e-9, abs=1e-12)


def cell(v: float) -> str:
    """As the page writes a number: a whole one as a count (8, not 8.000), else 4 significant digits."""
    return f"{int(v):,}" if v == int(v) else significant(v, 4)


def read(text: str) -> float:
    return float(text.replace("\u2212", "-").replace(",", ""))


def soup(r) -> BeautifulSoup:
    assert r.status_code == 200, r.text[:500]
    return BeautifulSoup(r.text, "html.parser")


def test_the_page_says_the_same_numbers(client, pair):
    ident, doc_a, doc_b = pair
    page = soup(client.get(f"/runs/{ident}/diff?a=3&b=6"))
    va, vb = raw_values(doc_a), raw_values(doc_b)
    for name in ("ratio", "kl", "entropy", "advantage", "length", "reward"):
        box = page.select_one(f"section[data-quantity='{name}']")
        cells = {tr.th.get_text(): [td.get_text() for td in tr.select("td")] for tr in box.select(".run-diff-stats tbody tr")}
        a, b = va[name], vb[name]
        assert cells["count"][:2] == [f"{a.size:,}", f"{b.size:,}"]
        for label, va_, vb_ in (("mean", a.mean(), b.mean()), ("p5", percentile(a, 5), percentile(b, 5)),
                                ("median (p50)", percentile(a, 50), percentile(b, 50)),
                                ("p95", percentile(a, 95), percentile(b, 95)), ("max", a.max(), b.max())):
            for text, v in zip(cells[label][:2], (va_, vb_), strict=True):
                # 4 significant digits; a mean that is float noise around 0 (1e−17) may read 0
                assert text == cell(v) or abs(v) < 1e-12 and abs(read(text)) < 1e-12, (name, label, text, v)
        assert f"is {significant(ks(a, b), 3)}" in box.select_one(".run-diff-shift").get_text()
        edges, ca, _ = histogram(a, b)
        assert len(box.select("svg.run-diff-svg rect.run-diff-bar-a")) == sum(1 for c in ca if c)
        assert box.select_one("svg.run-diff-svg")["aria-label"].startswith(box.h3.contents[0].strip())
    note = page.select_one("section[data-quantity='ratio'] .run-diff-note").get_text()
    assert note == "Left out as not finite: 0 at step 3, 1 at step 6."
    links = [a["href"] for a in page.select(".run-diff-links a")]
    body = client.get(f"/api/runs/{ident}/diff?a=3&b=6").json()
    assert f"/runs/{ident}" in links and f"/runs/{ident}?step=3#selected-step" in links
    assert body["a"]["url"] in links and body["b"]["url"] in links
    assert f"/api/runs/{ident}/diff?a=3&b=6" in links
    assert page.select_one("#run-diff-prompts-line").get_text().startswith("2 prompts appear at both steps")
    shown = {int(th.select_one(".run-diff-per").get_text().split(",")[0].removeprefix("id ")): th.code.get_text()
             for th in page.select(".run-diff-tokens tbody th")}
    assert len(shown) > 4 and not page.select("#run-diff-changed b")  # "<b>" is text, never markup
    for t, text in shown.items():  # nothing invisible: a space ·, a newline ↵, a tab →, a zero-width space by code
        assert text == VISIBLE.get(TEXTS[t], TEXTS[t])


@pytest.mark.parametrize(("query", "field", "words"), [
    ("a=3", "b", "missing"), ("b=6", "a", "missing"), ("", "a", "missing"),
    ("a=x&b=6", "a", "whole step"), ("a=3&b=6.5", "b", "whole step"),
    ("a=4&b=6", "a", "recorded steps are 3, 6"), ("a=3&b=60", "b", "recorded steps are 3, 6"),
    ("a=3&b=3", "b", "same step"), ("a=3&b=6&step=3", "step", "not a parameter"),
])
def test_a_bad_query_is_a_422_naming_the_field(client, pair, query, field, words):
    ident = pair[0]
    page = client.get(f"/runs/{ident}/diff?{query}")
    assert page.status_code == 422
    text = BeautifulSoup(page.text, "html.parser").get_text()
    assert re.search(rf"\b{field}: ", text) and (words in text or field == "a" and "Input" in text), text[:600]
    api = client.get(f"/api/runs/{ident}/diff?{query}")
    assert api.status_code == 422 and api.json()["detail"][0]["param"] == field, api.text
    if "recorded" in words or words in ("missing", "same step"):
        assert words in api.json()["error"]


def test_an_unknown_run_is_a_404_and_a_run_of_one_recorded_step_has_nothing_to_compare(client, pair):
    for ident in ("0123456789abcdef", "nope"):
        assert client.get(f"/runs/{ident}/diff?a=3&b=6").status_code == 404
        assert client.get(f"/api/runs/{ident}/diff?a=3&b=6").status_code == 404
    store = client.app.state.run_store
    lone, _ = store.add(json.dumps(healthy(12)).encode())
    store.link_records(lone, {3: store.recorded(pair[0])[3]})
    r = client.get(f"/api/runs/{lone}/diff?a=3&b=6")
    assert r.status_code == 422 and "a diff needs two recorded steps" in r.json()["error"]
    assert not soup(client.get(f"/runs/{lone}")).select("form.run-diff-form")


def test_the_explorer_offers_the_comparison_of_its_first_and_last_recorded_steps(client, pair):
    ident = pair[0]
    form = soup(client.get(f"/runs/{ident}")).select_one("#run-recorded form.run-diff-form")
    assert form["method"] == "get" and form["action"] == f"/runs/{ident}/diff"
    chosen = {s["name"]: s.select_one("option[selected]")["value"] for s in form.select("select")}
    assert chosen == {"a": "3", "b": "6"}
    assert [o["value"] for o in form.select("select[name=b] option")] == ["3", "6"]
    assert soup(client.get(f"{form['action']}?a=3&b=6")).h1.get_text() == "Step 3 against step 6"


@pytest.fixture
def example(client) -> str:
    return client.post("/api/runs/examples/trl").json()["id"]


def test_the_example_runs_steps_with_and_without_a_prompt_in_common(client, example):
    apart = soup(client.get(f"/runs/{example}/diff?a=30&b=120"))
    assert apart.select_one("#run-diff-prompts-line").get_text().startswith("Steps 30 and 120 have no prompt in common")
    assert not apart.select(".run-diff-prompts")
    near = client.get(f"/api/runs/{example}/diff?a=30&b=60").json()
    assert (near["prompts"]["matched"], near["prompts"]["only_a"], near["prompts"]["only_b"]) == (1, 1, 1)
    assert near["prompts"]["tied"][0] == {"prompt": "bad", "a": 0.0, "b": 1.0, "change": 1.0}
    ratio = near["quantities"]["ratio"]  # num_iterations = 1: π_old is π_θ, ρ is 1 at every token
    assert ratio["a"]["min"] == ratio["b"]["max"] == 1.0 and ratio["ks"] == 0.0
    page = soup(client.get(f"/runs/{example}/diff?a=30&b=60"))
    assert "exactly on-policy" in page.select_one("section[data-quantity='ratio']").get_text()
