"""Inspector chart geometry (app/views/charts/) against independent arithmetic, and the SVG
that templates/macros/charts.html draws from it: well-formed, accessible, CSP-clean."""
import itertools
import math
import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2 import Environment, FileSystemLoader
from paths import ROOT, SEED_PATH

from app.domain.snapshot import load_snapshot
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.step import run_grpo_step
from app.kinds.toy.views.charts.advantages import advantage_bars
from app.kinds.toy.views.charts.clip_plot import clip_plot
from app.kinds.toy.views.charts.probabilities import probability_bars
from app.kinds.toy.views.inspector import build_toy_inspector as build_inspector
from app.views.charts.frame import nice_ticks
from app.views.inspector import TensorStats, flatten, tensor_stats
from app.views.numbers import significant as fmt

SVG = "{http://www.w3.org/2000/svg}"
GEOM_TOL = 0.006  # every geometry number is rounded to 2 decimals


@pytest.fixture(scope="module")
def run():
    return run_grpo_step(GRPOParams())


@pytest.fixture(scope="module")
def macros():
    env = Environment(loader=FileSystemLoader(ROOT / "templates"), autoescape=True)
    return env.get_template("macros/charts.html").module


def parse(html) -> ET.Element:
    return ET.fromstring(str(html))  # raises on malformed XML


def local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def classes(el: ET.Element) -> set[str]:
    return set(el.get("class", "").split())


def with_class(root: ET.Element, cls: str) -> list[ET.Element]:
    return [el for el in root.iter() if cls in classes(el)]


def texts(root: ET.Element) -> list[str]:
    return [" ".join(t.strip() for t in el.itertext() if t.strip()) for el in root.iter(f"{SVG}text")]


# ------------------------------------------------------------------ helpers


def test_nice_ticks_examples():
    assert nice_ticks(0, 1) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert nice_ticks(0.3, 1.5) == [0.5, 0.75, 1.0, 1.25, 1.5]
    assert nice_ticks(-1.66, 1.3) == [-1.5, -1.0, -0.5, 0.0, 0.5, 1.0]
    assert nice_ticks(1.5, 0.3) == nice_ticks(0.3, 1.5)
    assert nice_ticks(2.0, 2.0) == [2.0]
    with pytest.raises(ValueError):
        nice_ticks(0, math.inf)


@settings(max_examples=300, deadline=None)
@given(st.floats(-1e6, 1e6), st.floats(1e-6, 1e6), st.integers(3, 8))
def test_nice_ticks_properties(lo, span, n):
    span = max(span, 1e-6 * abs(lo))  # chart ranges, not float-resolution slivers
    hi = lo + span
    ticks = nice_ticks(lo, hi, n)
    assert abs(len(ticks) - n) <= max(2, n // 2)  # steps come in 1, 2, 2.5, 5: up to ×2 apart
    assert all(lo - 1e-6 * span <= t <= hi + 1e-6 * span for t in ticks)
    steps = [b - a for a, b in itertools.pairwise(ticks)]
    assert all(math.isclose(s, steps[0], rel_tol=1e-6) for s in steps)
    assert any(math.isclose(steps[0], m * 10.0**k, rel_tol=1e-6) for m in (1, 2, 2.5, 5) for k in range(-14, 8))


def test_fmt_uses_unicode_minus_and_significant_digits():
    assert fmt(0.41234) == "0.412"
    assert fmt(-0.8868) == "−0.887"
    assert fmt(-1.2907) == "−1.29"
    assert fmt(1.0, strip=True) == "1" and fmt(0.5, strip=True) == "0.5"
    assert fmt(0.0) == "0" and fmt(-math.inf) == "−∞" and fmt(math.nan) == "NaN"
    assert fmt(1.234e-7) == "1.23e−7"


def test_flatten_and_tensor_stats():
    assert flatten([[1, 2], [3, [4.5]]]) == [1.0, 2.0, 3.0, 4.5]
    assert flatten(2.5) == [2.5] and flatten(None) == [] and flatten([]) == []
    assert tensor_stats([[1, -2], [3, 6]]) == TensorStats(min=-2.0, max=6.0, mean=2.0, count=4)
    assert tensor_stats(7) == TensorStats(min=7.0, max=7.0, mean=7.0, count=1)
    assert tensor_stats([]) == TensorStats(min=None, max=None, mean=None, count=0)
    assert tensor_stats([[]]) == TensorStats(min=None, max=None, mean=None, count=0)
    assert math.isnan(tensor_stats([1.0, math.nan]).mean)


def test_tensor_stats_of_engine_node(run):
    lp = run.nodes["policy.log_probabilities"].values
    stats = tensor_stats(lp)
    assert stats.count == 4 and stats.max == max(lp[0]) and stats.min == min(lp[0])
    assert math.isclose(stats.mean, sum(lp[0]) / 4, rel_tol=1e-12)


# ------------------------------------------------------------------ probability bars


def test_probability_bars_from_engine_row(run):
    row = run.nodes["policy.log_probabilities"].values[0]  # shape (1, 4): the caller passes the row
    chart = probability_bars(row, correct=run.prompt.correct)
    assert len(chart.bars) == 4
    assert math.isclose(chart.total, 1.0, abs_tol=1e-12)  # exp of a log-softmax row sums to 1
    for bar, lp in zip(chart.bars, row, strict=True):
        p = math.exp(lp)
        assert bar.probability == pytest.approx(p, abs=1e-15)
        assert bar.width == pytest.approx(p * chart.track_width, abs=GEOM_TOL)  # ∝ p, full width at p = 1
        assert bar.x == chart.track_x and bar.height == 22
        assert bar.value_text == f"p = {fmt(p)} (log p = {fmt(lp)})"
        assert bar.hit.choice == bar.index and not bar.hit.samples
        assert bar.hit.label == f"{bar.label}: {bar.value_text}"
        assert bar.hit.y < bar.text_y - 8 and bar.y + bar.height <= bar.hit.y + bar.hit.height  # label and bar
        assert bar.underline.y >= bar.y + bar.height and bar.underline.width == chart.track_width
    assert sum(b.width for b in chart.bars) == pytest.approx(chart.track_width, abs=4 * GEOM_TOL)
    correct = [b for b in chart.bars if b.correct]
    assert [b.index for b in correct] == [run.prompt.correct]
    assert correct[0].label == f"choice {run.prompt.correct} ✓"
    assert all("✓" not in b.label for b in chart.bars if not b.correct)
    ys = [b.y for b in chart.bars]
    assert ys == sorted(ys) and all(b.y + b.height <= chart.grid_bottom for b in chart.bars)


def test_probability_bars_value_text_and_validation():
    chart = probability_bars([math.log(0.412), math.log(0.588)], labels=["yes", "no"], width=200)
    assert chart.bars[0].value_text == "p = 0.412 (log p = −0.887)"
    assert chart.bars[0].label == "yes" and chart.bars[0].width == pytest.approx(0.412 * chart.track_width, abs=GEOM_TOL)
    assert chart.track_x + chart.track_width <= 200
    zero = probability_bars([0.0, -math.inf])
    assert zero.bars[0].width == zero.track_width and zero.bars[1].width == 0
    with pytest.raises(ValueError):
        probability_bars([])
    with pytest.raises(ValueError):
        probability_bars([0.0], labels=["a", "b"])
    with pytest.raises(ValueError):
        probability_bars([0.0, -1.0], correct=2)


# ------------------------------------------------------------------ advantage bars


def test_advantage_bars_geometry():
    adv, rew = [1.5, -0.5, -1.0, 0.0], [2.0, 0.0, -1.0, 0.5]
    chart = advantage_bars(adv, rew, [True, False, True, False])
    half = (chart.plot_bottom - chart.plot_top) / 2
    assert chart.zero_y == pytest.approx(chart.plot_top + half, abs=GEOM_TOL)
    assert chart.y_max == 1.5 and not chart.all_zero and chart.note == ""
    for bar, a in zip(chart.bars, adv, strict=True):
        assert bar.height == pytest.approx(abs(a) / 1.5 * half, abs=GEOM_TOL)
        if a > 0:
            assert bar.sign == 1 and bar.y < chart.zero_y
            assert bar.y + bar.height == pytest.approx(chart.zero_y, abs=GEOM_TOL)
            assert bar.value_y < bar.y
        elif a < 0:
            assert bar.sign == -1 and bar.y == chart.zero_y and bar.value_y > bar.y + bar.height
        else:
            assert bar.sign == 0 and bar.height == 0
    assert chart.bars[0].y == pytest.approx(chart.plot_top, abs=GEOM_TOL)  # max |A| fills the half
    assert [b.reward_text for b in chart.bars] == ["r = 2", "r = 0", "r = −1", "r = 0.5"]
    assert [b.index_text for b in chart.bars] == ["#0", "#1", "#2", "#3"]
    assert [b.clip_active for b in chart.bars] == [True, False, True, False]
    xs = [b.x for b in chart.bars]
    assert xs == sorted(xs) and xs[0] >= chart.plot_left and xs[-1] + chart.bars[-1].width <= chart.plot_right
    assert chart.zero_label.text == "0 (group mean)" and chart.zero_label.y > chart.zero_y
    # each slot is one hit region (labels included), named like the bar, linked to its sample
    for bar in chart.bars:
        assert bar.hit.samples == (bar.index,) and bar.hit.label == bar.title
        assert bar.hit.x <= bar.x and bar.x + bar.width <= bar.hit.x + bar.hit.width
        assert bar.hit.y < chart.plot_top and bar.hit.y + bar.hit.height <= chart.height
        assert bar.hit.x <= bar.underline.x and bar.underline.x + bar.underline.width <= bar.hit.x + bar.hit.width
    assert all(a.hit.x + a.hit.width <= b.hit.x for a, b in itertools.pairwise(chart.bars))  # no overlap
    named = advantage_bars(adv, rew, labels=["1 · wrong"] * 4)
    assert named.bars[0].title.startswith("sample 0 (1 · wrong): reward 2")
    with pytest.raises(ValueError):
        advantage_bars(adv, rew, labels=["x"])


def test_all_zero_advantages_teach_nothing():
    chart = advantage_bars([0.0] * 4, [1.0] * 4)
    assert chart.all_zero and chart.y_max == 1e-9
    assert chart.note == "all advantages are 0: this group teaches nothing through the surrogate"
    assert all(b.height == 0 and b.sign == 0 for b in chart.bars)


def test_advantage_bars_from_equal_reward_engine_run():
    r = run_grpo_step(GRPOParams(rewards="1,1,1,1"))
    chart = advantage_bars([s["advantage"] for s in r.samples], [s["reward"] for s in r.samples])
    assert chart.all_zero and "teaches nothing" in chart.note


def test_advantage_bars_many_samples_drop_labels_and_truncate():
    chart = advantage_bars([1.0, -1.0] * 200, [1.0, 0.0] * 200)
    assert not chart.labelled and len(chart.bars) == 256
    assert chart.note == "showing the first 256 of 400 samples"
    with pytest.raises(ValueError):
        advantage_bars([1.0], [1.0, 0.0])


# ------------------------------------------------------------------ clip plot


def sample(rho, a, eps, action=0, reward=0.0):
    clipped = min(rho * a, min(max(rho, 1 - eps), 1 + eps) * a)
    active = (a > 0 and rho > 1 + eps) or (a < 0 and rho < 1 - eps)
    return {"ratio": rho, "advantage": a, "clipped": clipped, "clip_active": active, "action": action, "reward": reward}


def to_screen(chart, x, y):
    (x0, x1), (y0, y1) = chart.x_range, chart.y_range
    return (chart.plot_left + (x - x0) / (x1 - x0) * chart.plot_width,
            chart.plot_bottom - (y - y0) / (y1 - y0) * chart.plot_height)


def curve_at(curve, x):
    """Linear interpolation of the curve's exact breakpoints."""
    pts = curve.points
    for (xa, ya), (xb, yb) in itertools.pairwise(pts):
        if xa <= x <= xb:
            return ya + (yb - ya) * (x - xa) / (xb - xa)
    raise AssertionError(f"{x} outside the curve")


@pytest.mark.parametrize("eps", [0.2, 0.1, 0.45])
def test_clip_curves_are_exact(eps):
    chart = clip_plot(eps, [])
    pos, neg = chart.curves
    assert (pos.sign, neg.sign, pos.dashed, neg.dashed) == (1, -1, False, True)
    assert pos.label.text == "A > 0 (A = +1)" and neg.label.text == "A < 0 (A = −1)"
    lo, hi = max(0.0, 1 - 2 * eps - 0.1), 1 + 2 * eps + 0.1
    assert chart.x_range == pytest.approx((lo, hi))
    for c in chart.curves:  # piecewise linear: the breakpoints themselves, not samples
        assert [x for x, _ in c.points] == pytest.approx([lo, 1 - eps, 1 + eps, hi])
    # A = +1: L = min(ρ, clip(ρ));  A = −1: L = −max(ρ, clip(ρ))
    assert curve_at(pos, 1 + 2 * eps) == pytest.approx(1 + eps)
    assert curve_at(neg, 1 + 2 * eps) == pytest.approx(-(1 + 2 * eps))
    assert curve_at(pos, 1 - 2 * eps) == pytest.approx(1 - 2 * eps)
    assert curve_at(neg, 1 - 2 * eps) == pytest.approx(-(1 - eps))
    assert curve_at(pos, 1.0) == pytest.approx(1.0) and curve_at(neg, 1.0) == pytest.approx(-1.0)
    y0, y1 = chart.y_range
    assert all(y0 <= y <= y1 for c in chart.curves for _, y in c.points)
    # the polyline's screen points are the data points, mapped
    for c in chart.curves:
        svg = [tuple(map(float, p.split(","))) for p in c.svg_points.split()]
        for (sx, sy), (x, y) in zip(svg, c.points, strict=True):
            ex, ey = to_screen(chart, x, y)
            assert sx == pytest.approx(ex, abs=GEOM_TOL) and sy == pytest.approx(ey, abs=GEOM_TOL)
    # the band spans [1−ε, 1+ε], labelled with its values at its edges
    bl, _ = to_screen(chart, 1 - eps, 0)
    br, _ = to_screen(chart, 1 + eps, 0)
    assert chart.band_x == pytest.approx(bl, abs=GEOM_TOL)
    assert chart.band_x + chart.band_width == pytest.approx(br, abs=2 * GEOM_TOL)
    lo_label, hi_label = chart.band_labels
    assert lo_label.text == f"1−ε = {fmt(1 - eps, 4, True)}" and hi_label.text.startswith("1+ε = ")
    assert abs(lo_label.x - bl) <= 2.01 and abs(hi_label.x - br) <= 2.01
    _, zy = to_screen(chart, 0, 0.0)
    assert chart.zero_y == pytest.approx(zy, abs=GEOM_TOL)


def test_clip_plot_x_range_follows_samples():
    eps = 0.2
    chart = clip_plot(eps, [sample(0.3, -1.0, eps), sample(2.5, 1.0, eps)])
    assert chart.x_range == pytest.approx((0.2, 2.6))
    chart = clip_plot(eps, [sample(0.05, -1.0, eps)])
    assert chart.x_range[0] == 0.0  # never a negative ratio


def test_clip_plot_samples_sit_on_their_curve():
    eps = 0.2
    group = [sample(0.5, -1.3, eps, 1), sample(0.9, -0.4, eps), sample(1.1, 0.7, eps),
             sample(1.6, 2.0, eps, 2), sample(1.3, -0.8, eps), sample(0.7, 0.0, eps)]
    chart = clip_plot(eps, group)
    assert len(chart.markers) == len(group)
    for m in chart.markers:
        s = group[m.indices[0]]
        a = s["advantage"]
        expected = 0.0 if a == 0 else (min(s["ratio"], min(max(s["ratio"], 0.8), 1.2)) if a > 0
                                       else -max(s["ratio"], min(max(s["ratio"], 0.8), 1.2)))
        assert m.value == pytest.approx(expected)
        if a:
            curve = chart.curves[0] if a > 0 else chart.curves[1]
            assert m.value == pytest.approx(curve_at(curve, s["ratio"]))
        ex, ey = to_screen(chart, s["ratio"], expected)
        assert (m.cx, m.cy) == (pytest.approx(ex, abs=GEOM_TOL), pytest.approx(ey, abs=GEOM_TOL))
        assert m.shape == {1: "circle", -1: "square", 0: "cross"}[(a > 0) - (a < 0)]
        assert m.hollow == s["clip_active"]
    assert chart.clip_active_count == 2  # ρ = 0.5 with A < 0, ρ = 1.6 with A > 0
    with pytest.raises(ValueError):
        clip_plot(1.5, group)


def test_clip_plot_from_engine(run):
    eps = run.params.clip_epsilon
    chart = clip_plot(eps, run.samples)
    active = sum(s["clip_active"] for s in run.samples)
    assert active >= 1 and chart.clip_active_count == active
    assert sum(m.hollow for m in chart.markers) == active
    for m in chart.markers:
        s = run.samples[m.indices[0]]
        assert m.value == pytest.approx(s["clipped"] / abs(s["advantage"]))
        curve = chart.curves[0] if s["advantage"] > 0 else chart.curves[1]
        assert m.value == pytest.approx(curve_at(curve, s["ratio"]), abs=1e-12)
    # identical samples overlap: a "×n" label says how many
    assert {t.text for t in chart.count_labels} <= {f"×{k}" for k in range(2, len(run.samples) + 1)}
    assert sum(int(t.text[1:]) for t in chart.count_labels) <= len(run.samples)


def test_clip_plot_groups_markers_for_huge_groups():
    eps = 0.2
    group = [sample(0.5, -1.0, eps), sample(1.1, 1.0, eps)] * 150
    chart = clip_plot(eps, group)
    assert len(chart.markers) == 2 and sorted(len(m.indices) for m in chart.markers) == [150, 150]
    assert [h.samples for h in chart.hits] == [m.indices for m in chart.markers]  # one hit per point
    assert all(h.label.startswith("samples 0, 2, 4,") or h.label.startswith("samples 1, 3, 5,") for h in chart.hits)
    assert all(h.label.split(":")[0].endswith(", …") for h in chart.hits)


def test_clip_plot_hits_cover_the_points_and_name_the_choices():
    eps = 0.2
    group = [sample(0.5, -1.3, eps, 1), sample(1.6, 2.0, eps, 2), sample(0.5, -1.3, eps, 1)]
    chart = clip_plot(eps, group, labels=["1 · wrong", "2 · readable correct", "1 · wrong"])
    assert len(chart.markers) == 3 and len(chart.hits) == 2
    for hit in chart.hits:
        for m in (m for m in chart.markers if set(m.indices) <= set(hit.samples)):
            assert hit.x < m.cx < hit.x + hit.width and hit.y < m.cy < hit.y + hit.height
            assert m.ring > m.size
    assert {h.samples for h in chart.hits} == {(0, 2), (1,)}
    shared = next(h for h in chart.hits if h.samples == (0, 2))
    assert shared.label.startswith("samples 0, 2: choice 1 · wrong, reward 0, A = −1.30, ρ = 0.500, L = −1.04")
    assert shared.label.endswith("clip active: ∂L/∂ρ = 0")
    assert chart.markers[0].title.startswith("sample 0: choice 1 · wrong")
    with pytest.raises(ValueError):
        clip_plot(eps, group, labels=["a"])


# ------------------------------------------------------------------ rendered SVG


def check_svg(root: ET.Element, title: str) -> ET.Element:
    """A chart is a named group: the drawing (one svg role=img with the summary), then its
    focusable hit regions, each named and linked to samples or a choice (static/js/linked.js)."""
    assert local(root.tag) == "figure" and "chart" in classes(root)
    outer = [el for el in root if local(el.tag) == "svg"]
    assert len(outer) == 1 and len([el for el in root.iter() if local(el.tag) == "svg"]) == 2
    svg = outer[0]
    assert svg.get("role") == "group" and svg.get("aria-label") == title
    assert svg.get("viewBox") and svg.get("width") and svg.get("height")
    drawing = svg[0]
    assert local(drawing.tag) == "svg" and drawing.get("role") == "img"
    assert (drawing.get("width"), drawing.get("height"), drawing.get("viewBox")) == (svg.get("width"),
                                                                                     svg.get("height"), None)
    assert drawing.get("aria-label", "").startswith(title)
    assert len(drawing.get("aria-label")) > len(title) + 20  # a summary, not just the title
    assert drawing.find(f"{SVG}title").text == title
    assert not [el for el in drawing.iter() if el.get("tabindex")]  # nothing focusable inside an img
    layers = [el for el in svg if "hit-layer" in classes(el)]
    assert len(layers) == 1 and list(svg) == [drawing, layers[0]]  # hits drawn last, over the marks
    for hit in layers[0]:
        assert local(hit.tag) == "rect" and classes(hit) == {"hit"}
        assert hit.get("tabindex") == "0" and hit.get("role") == "img" and hit.get("aria-label")
        assert hit.find(f"{SVG}title").text == hit.get("aria-label")
        assert (hit.get("fill"), hit.get("pointer-events")) == ("none", "all")  # invisible, yet hoverable
        assert hit.get("data-samples") or hit.get("data-choice")
    for el in svg.iter():
        if {"link-frame", "link-mark", "link-ring"} & classes(el):
            assert el.get("display") == "none"  # shown only while linked (static/css/linked.css)
    for el in root.iter():
        assert "style" not in el.attrib, el.tag  # strict CSP: no inline styles
        assert not any(k.lower().startswith("on") for k in el.attrib), el.tag
        assert local(el.tag) not in {"script", "style", "foreignObject"}
    ids = {el.get("id") for el in svg.iter() if el.get("id")}
    refs = set(re.findall(r"url\(#([^)]+)\)", ET.tostring(svg, encoding="unicode")))
    assert refs <= ids  # every pattern used is defined in the same svg
    figcaption = root.find("figcaption")
    assert figcaption is not None and title in "".join(figcaption.itertext())
    return svg


def test_render_engine_charts(run, macros):
    row = run.nodes["policy.log_probabilities"].values[0]
    prob = parse(macros.probability_bars(probability_bars(row, correct=run.prompt.correct), "Policy π(·|q)"))
    svg = check_svg(prob, "Policy π(·|q)")
    assert len(with_class(svg, "bar-correct")) == 1 and len(with_class(svg, "bar-hatch")) == 1
    assert f"choice {run.prompt.correct} ✓" in texts(svg)

    adv_chart = advantage_bars([s["advantage"] for s in run.samples], [s["reward"] for s in run.samples],
                                      [s["clip_active"] for s in run.samples])
    svg = check_svg(parse(macros.advantage_bars(adv_chart, "Group advantages")), "Group advantages")
    n_pos = sum(s["advantage"] > 0 for s in run.samples)
    n_neg = sum(s["advantage"] < 0 for s in run.samples)
    assert len(with_class(svg, "bar-pos")) == n_pos and len(with_class(svg, "bar-neg")) == n_neg
    assert len(with_class(svg, "bar-hatch")) == n_neg  # negative bars are hatched, not only coloured
    assert len(with_class(svg, "bar-clip-outline")) == sum(s["clip_active"] for s in run.samples)
    assert "0 (group mean)" in texts(svg) and "#7" in texts(svg)

    clip = clip_plot(run.params.clip_epsilon, run.samples)
    svg = check_svg(parse(macros.clip_plot(clip, "Clipped surrogate")), "Clipped surrogate")
    active = sum(s["clip_active"] for s in run.samples)
    assert len(with_class(svg, "marker-hollow")) == active
    assert len(with_class(svg, "marker-filled")) == len(run.samples) - active
    assert len(with_class(svg, "clip-band")) == 1 and len(with_class(svg, "clip-band-hatch")) == 1
    polylines = list(svg.iter(f"{SVG}polyline"))
    assert [p.get("stroke-dasharray") is not None for p in polylines] == [False, True]
    t = texts(svg)
    for label in ("A > 0 (A = +1)", "A < 0 (A = −1)", "ratio ρ = π/π_old", "surrogate L / |A|",
                  "hollow = clip active: ∂L/∂ρ = 0", "1−ε = 0.8", "1+ε = 1.2"):
        assert label in t
    assert len([x for x in t if re.fullmatch(r"−?\d+(\.\d+)?", x)]) >= 6  # numbered ticks on both axes


def test_render_all_zero_and_cross_markers(macros):
    svg = check_svg(parse(macros.advantage_bars(advantage_bars([0.0] * 3, [0.0] * 3), "Flat")), "Flat")
    note = with_class(svg, "chart-note")
    assert len(note) == 1
    assert " ".join(s.strip() for s in note[0].itertext() if s.strip()) == \
        "all advantages are 0: this group teaches nothing through the surrogate"
    eps = 0.2
    chart = clip_plot(eps, [sample(1.0, 0.0, eps), sample(0.5, -1.0, eps)])
    svg = check_svg(parse(macros.clip_plot(chart, "Zero sample")), "Zero sample")
    crosses = [el for el in with_class(svg, "marker-cross") if "marker" in classes(el)]
    assert len(crosses) == 1 and len(with_class(svg, "marker-hollow")) == 1


def test_render_escapes_user_text_and_keeps_ids_apart(macros):
    evil = '<script>alert("x")</script> & \'q\''
    chart = probability_bars([math.log(0.5), math.log(0.5)], correct=0, labels=[evil, "b"])
    a = str(macros.probability_bars(chart, evil))
    assert "<script>" not in a
    root = parse(a)
    svg = check_svg(root, evil)
    assert f"{evil} ✓" in texts(svg)
    # two charts with one title: explicit uids keep pattern ids apart; the default is stable
    page = parse(f"<div>{macros.probability_bars(chart, 'Same', uid='one')}"
                 f"{macros.probability_bars(chart, 'Same', uid='two')}</div>")
    ids = [el.get("id") for el in page.iter() if el.get("id")]
    assert len(ids) == 2 and len(set(ids)) == 2
    assert all(re.fullmatch(r"[a-z][a-z0-9-]*", i) for i in ids)
    default = [el.get("id") for el in parse(macros.probability_bars(chart, evil)).iter() if el.get("id")]
    assert all(re.fullmatch(r"[a-z][a-z0-9-]*", i) for i in default)


def test_css_covers_the_drawn_classes(run, macros):
    css = "".join((ROOT / "static" / "css" / name).read_text() for name in ("charts.css", "linked.css"))
    assert "style=" not in (ROOT / "templates" / "macros" / "charts.html").read_text()
    assert "style=" not in (ROOT / "templates" / "macros" / "svg.html").read_text()
    styled = set(re.findall(r"\.([a-z][a-z0-9-]*)", css))
    row = run.nodes["policy.log_probabilities"].values[0]
    html = "".join(map(str, [
        macros.probability_bars(probability_bars(row, correct=1), "p"),
        macros.advantage_bars(advantage_bars([s["advantage"] for s in run.samples],
                                                    [s["reward"] for s in run.samples],
                                                    [s["clip_active"] for s in run.samples]), "a"),
        macros.clip_plot(clip_plot(0.2, run.samples + [sample(1.0, 0.0, 0.2)]), "c"),
    ]))
    used = {c for el in parse(f"<div>{html}</div>").iter() for c in classes(el)}
    structural = {"chart-probabilities", "chart-advantages", "chart-clip", "prob-row", "is-correct", "adv-bar", "is-positive",
                  "is-negative", "is-zero", "is-clip-active", "axis", "axis-x", "axis-y", "clip-band-group",
                  "legend", "marker", "legend-marker", "marker-label", "zero-label", "bar", "chart-drawing",
                  "hit-layer"}
    assert used - structural <= styled, sorted(used - structural - styled)


def test_inspector_builds_the_charts_the_template_draws(run):
    snapshot = load_snapshot(SEED_PATH)
    logp = build_inspector(snapshot, "policy.log_probabilities", run)
    row = run.nodes["policy.log_probabilities"].values[0]
    names = ["0 · right but unformatted", "1 · wrong", "2 · readable correct", "3 · mixed-language correct"]
    assert run.prompt.correct == 2 and logp.choice_labels == tuple(names[s["action"]] for s in run.samples)
    assert logp.probability_charts == (probability_bars(row, run.prompt.correct, names),)
    assert [b.label for b in logp.probability_charts[0].bars] == [*names[:2], names[2] + " ✓", names[3]]
    adv = build_inspector(snapshot, "advantages", run).advantage_chart
    assert [b.advantage for b in adv.bars] == [s["advantage"] for s in run.samples]
    # no clip marks on the advantages: the clip is the clip chart's to show (issue 20)
    assert [b.clip_active for b in adv.bars] == [False] * len(run.samples)
    assert all(f"({names[s['action']]})" in b.title for b, s in zip(adv.bars, run.samples, strict=True))
    clip = build_inspector(snapshot, "ratio", run).clip_chart
    assert clip == clip_plot(0.2, run.samples, logp.choice_labels)
    assert all(f"choice {names[run.samples[m.indices[0]]['action']]}" in m.title for m in clip.markers)
    assert build_inspector(snapshot, "input", run, "clip").clip_chart is not None  # the clip step shows it
    plain = build_inspector(snapshot, "input", run, "policy")
    assert (plain.probability_charts, plain.advantage_chart, plain.clip_chart) == ((), None, None)


def test_clip_plot_draws_an_asymmetric_band():
    """DAPO's clip-higher: the band is [1−ε, 1+ε_high], and the A > 0 curve breaks at 1+ε_high."""
    from app.kinds.toy.engine.params import GRPOParams
    from app.kinds.toy.engine.step import run_grpo_step
    from app.kinds.toy.views.charts.clip_plot import clip_plot
    run = run_grpo_step(GRPOParams(preset="dapo", rewards=(1, 0, 0, 1, 0, 0, 1, 0)))
    plot = clip_plot(0.2, run.samples, epsilon_high=0.28)
    assert plot.band_labels[1].text == "1+ε_high = 1.28" and "[0.8, 1.28]" in plot.caption
    assert (1.28, 1.28) in plot.curves[0].points and (0.8, -0.8) in plot.curves[1].points
    assert clip_plot(0.2, run.samples).band_labels[1].text == "1+ε = 1.2"
