"""Issue 50 on the run explorer, without a browser: each chart's y axis inside its metric's domain
(views/run_domains.py), a reward function's own curves in one group, TensorBoard's debiased EMA
(domain/run_smoothing.py) against an independent float64 computation, `?smooth=` drawn and carried by every
link, and the data attributes the readout script reads (every drawn point's step, y and logged value)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from bs4 import BeautifulSoup
from run_fixtures import entry, state

from app.runs.domain.run_log import read_trainer_state
from app.runs.domain.run_smoothing import ema
from app.runs.examples import RUN_EXAMPLE
from app.runs.views.run_charts import cell, run_chart, y_range
from app.runs.views.run_domains import COSINE, FREE, NON_NEGATIVE, SHARE, metric_domain
from app.runs.views.run_view import RunQuery, explorer

LOG = read_trainer_state(RUN_EXAMPLE.read_bytes())
LOGGED = [e for e in json.loads(RUN_EXAMPLE.read_text())["log_history"] if "loss" in e]


@pytest.fixture
def client(make_client, tmp_path):
    return make_client(data_dir=tmp_path, follow_redirects=False)


@pytest.fixture
def example(client) -> str:
    return client.post("/runs/examples/trl").headers["location"]


def soup(r) -> BeautifulSoup:
    assert r.status_code == 200, r.text[:300]
    return BeautifulSoup(r.text, "html.parser")


def tensorboard_ema(values: list[float], w: float) -> np.ndarray:
    """Each finite point's smoothed value written out as a weighted mean of the finite points so far:
    Σ_j (1 − w) w^(k−j) x_j / (1 − w^k), in float64 (not the recurrence the app runs)."""
    x = np.asarray(values, dtype=np.float64)
    out = x.copy()
    finite = np.flatnonzero(np.isfinite(x))
    xs = x[finite]
    for k in range(1, len(xs) + 1):
        weights = (1 - w) * w ** np.arange(k - 1, -1, -1, dtype=np.float64)
        out[finite[k - 1]] = weights @ xs[:k] / (1 - w ** k)
    return out


# -- domains ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, domain", [
    ("clip_ratio/region_mean", SHARE), ("clip_ratio/high_max", SHARE), ("clip_ratio", SHARE),
    ("completions/clipped_ratio", SHARE), ("frac_reward_zero_std", SHARE), ("samples/tied_group_share", SHARE),
    ("tokens/is_grad/token_mask/dropped_share", SHARE), ("clip_fraction", SHARE),
    ("kl", NON_NEGATIVE), ("entropy", NON_NEGATIVE), ("grad_norm", NON_NEGATIVE), ("reward_std", NON_NEGATIVE),
    ("rewards/ends/std", NON_NEGATIVE), ("completions/max_terminated_length", NON_NEGATIVE),
    ("tokens/is_grad/token_truncate/norm_ratio", NON_NEGATIVE), ("sampling/importance_sampling_ratio/min", NON_NEGATIVE),
    ("tokens/is_grad/sequence_mask/cosine", COSINE),
    ("loss", FREE), ("reward", FREE), ("rewards/ends/mean", FREE), ("tokens/mismatch_mean", FREE), ("my_metric", FREE),
])
def test_each_metric_has_the_domain_its_meaning_gives(name, domain):
    assert metric_domain(name) == domain


def test_a_share_stays_in_0_1_and_a_ratio_never_goes_below_0():
    assert y_range([0.0] * 5, SHARE) == (0.0, 1.0)  # a clip ratio stuck at 0: was -0.5..0.5
    assert y_range([1.0] * 5, SHARE) == (0.0, 1.0)  # every completion clipped: was 0.5..1.5
    lo, hi = y_range([0.375, 1.0], SHARE)
    assert lo > 0 and hi == 1.0  # padded below, not past 1
    lo, hi = y_range([0.001, 0.003], SHARE)
    assert 0 < lo < 0.001 and 0.003 < hi < 0.01
    assert y_range([0.0] * 3, NON_NEGATIVE) == (0.0, 0.5)
    assert y_range([0.01, 16.3], NON_NEGATIVE)[0] == 0.0
    assert y_range([-1e-9, 1.0], NON_NEGATIVE)[0] == -1e-9  # a value past the bound is still drawn
    assert y_range([-0.3, 0.6])[0] < -0.3 and y_range([0.0] * 2) == (-0.5, 0.5)  # a loss pads freely
    assert y_range([0.99, 1.0], COSINE)[1] == 1.0


def test_no_chart_of_the_example_run_shows_an_impossible_value():
    view = explorer("x", LOG, RunQuery())
    charts = {c.key: c for s in view.sections for c in s.charts + tuple(c for g in s.groups for c in g.charts)}
    assert len(charts) == 27
    for name, chart in charts.items():
        lo, hi = metric_domain(name)
        ticks = [t.value for t in chart.y_ticks]
        assert lo is None or min(ticks) >= lo, (name, ticks)
        assert hi is None or max(ticks) <= hi, (name, ticks)
    clipped = charts["completions/clipped_ratio"]  # logged 0.375 to 1.0: the top of the plot is 1
    assert max(t.value for t in clipped.y_ticks) == 1.0 and clipped.y_ticks[-1].pos == clipped.plot_top
    assert [t.value for t in charts["clip_ratio/region_mean"].y_ticks][0] == 0.0
    assert charts["clip_ratio/region_mean"].zero_y is None  # 0 is the axis, not a line inside it


# -- grouping ---------------------------------------------------------------------------------------------------

def test_a_reward_functions_curves_are_one_group_a_function_to_a_row(client, example):
    page = soup(client.get(example))
    group = page.select_one("#section-rewards #group-rewards-per-function")
    assert group.h3.string == "Per reward function"
    assert [f["data-metric"] for f in group.select("figure.run-chart")] == [
        "rewards/count_a/mean", "rewards/count_a/std", "rewards/ends/mean", "rewards/ends/std"]
    outside = [f["data-metric"] for f in page.select("#section-rewards > .run-chart-grid figure")]
    assert outside == ["reward", "reward_std"]
    assert not page.select("figure[data-metric^='rewards/']:not(#group-rewards-per-function *)")


def test_the_per_sample_readers_functions_group_too_and_one_function_alone_is_no_group():
    def run(names):
        entries = [entry(s, **{n: 0.1 * s for n in names}) for s in range(1, 6)]
        return explorer("x", read_trainer_state(json.dumps(state(entries)).encode()), RunQuery())

    view = run(["samples/rewards/fmt/mean", "samples/rewards/acc/mean", "samples/rewards/fmt/std"])
    samples = next(s for s in view.sections if s.title.startswith("Samples"))
    assert [c.key for c in samples.groups[0].charts] == [
        "samples/rewards/fmt/mean", "samples/rewards/fmt/std", "samples/rewards/acc/mean"]
    rewards = next(s for s in run([]).sections if s.title == "Rewards")  # rewards/accuracy/mean alone
    assert not rewards.groups and "rewards/accuracy/mean" in [c.key for c in rewards.charts]


# -- smoothing --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("w", [0.0, 0.3, 0.6, 0.9, 0.99])
def test_ema_is_tensorboards_debiased_average(w):
    rng = np.random.default_rng(50)
    values = list(rng.normal(1.0, 0.5, 300))
    values[7], values[80] = math.nan, math.inf  # passed through, the average left as it was
    got = np.asarray(ema(values, w))
    want = tensorboard_ema(values, w)
    assert np.isnan(got[7]) and got[80] == math.inf
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-12, atol=0)
    if w:
        assert got[0] == values[0]  # debiased: the first point is itself, not (1 - w) of it
        assert abs(got[1] - (w * (1 - w) * values[0] + (1 - w) * values[1]) / (1 - w ** 2)) < 1e-15


def test_ema_of_a_constant_series_is_the_series_and_a_bad_weight_is_refused():
    assert ema([0.3] * 50, 0.9) == [0.3] * 50
    assert ema([], 0.6) == []
    for w in (-0.1, 1.0, math.nan):
        with pytest.raises(ValueError):
            ema([1.0, 2.0], w)


def test_smooth_draws_the_smoothed_line_over_the_faint_raw_one_and_every_link_keeps_it(client, example):
    page = soup(client.get(example + "?smooth=0.6&step=60"))
    kl = page.select_one("figure[data-metric='kl']")
    assert "is-raw" in kl.select_one("polyline.run-line")["class"] and kl.select_one("polyline.run-line-smooth")
    want = tensorboard_ema([v for _, v in LOG.series("kl")], 0.6)
    svg = kl.svg
    assert svg["data-smooth-values"].split() == [cell(v) for v in want]
    assert kl.select_one(".run-readout").get_text() == f"step 60: {cell(LOGGED[59]['kl'])} · smoothed {cell(want[59])}"
    assert page.select_one("#run-smooth")["value"] == "0.6"
    assert all("smooth=0.6" in a["href"] for a in page.select("a.finding-step, .run-step-nav a, a.run-dot"))
    assert page.select_one(".run-zoom input[name='smooth']")["value"] == "0.6"
    zoomed = soup(client.get(example + "?smooth=0.6&from=50&to=70")).select_one("figure[data-metric='kl'] svg")
    assert zoomed["data-smooth-values"].split() == [cell(v) for v in want[49:70]]  # smoothed over the whole run
    plain = soup(client.get(example))
    assert not plain.select("polyline.run-line-smooth") and plain.select_one("#run-smooth")["value"] == "0"


@pytest.mark.parametrize("value", ["1", "0.995", "-0.1", "nan", "x", ""])
def test_a_smoothing_weight_outside_0_to_0_99_is_a_422_naming_it(client, example, value):
    r = client.get(f"{example}?smooth={value}")
    assert r.status_code == 422 and "smooth: " in BeautifulSoup(r.text, "html.parser").get_text()


# -- what the readout reads --------------------------------------------------------------------------------------

def test_every_chart_carries_each_drawn_points_step_y_and_logged_value(client, example):
    page = soup(client.get(example))
    for figure in page.select("figure.run-chart"):
        name, svg = figure["data-metric"], figure.svg
        assert svg["data-steps"].split() == [str(e["step"]) for e in LOGGED]
        assert svg["data-values"].split() == [cell(e[name]) for e in LOGGED]
        left, right, top, bottom = map(float, svg["data-plot"].split())
        assert all(top <= float(y) <= bottom for y in svg["data-ys"].split())
        dots = [float(c["cy"]) for c in figure.select("a.run-dot circle")]
        assert dots == [float(y) for y in svg["data-ys"].split()]  # the readout's dot sits on the chart's own
        assert (svg["data-x-lo"], svg["data-x-hi"]) == ("1", "120")
        assert figure.select_one(".run-readout").get_text() == f"step 120: {cell(LOGGED[-1][name])}"


def test_a_cut_chart_reads_its_drawn_points_and_a_nan_sits_on_the_top_edge():
    points = [(s, math.sin(s / 50)) for s in range(1, 2001)]
    points[999] = (1000, math.nan)
    chart = run_chart("loss", "", points, (1, 2000), lambda s: f"?step={s}", domain=FREE)
    steps = [int(s) for s in chart.read_steps.split()]
    assert 1000 in steps and len(steps) == chart.drawn < 2000
    i = steps.index(1000)
    assert chart.read_values.split()[i] == "NaN" and float(chart.read_ys.split()[i]) == chart.plot_top
