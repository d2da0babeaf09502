"""Training-path panel: geometry (app/process_charts.py) against independent arithmetic,
and templates/_process_panel.html rendered from the real payloads of all three paths:
selectors, links, accessibility, CSP-clean, well-formed SVG, escaping."""
import copy
import math
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from jinja2 import Environment, FileSystemLoader

from app import process_charts as pc
from app.main import create_app

ROOT = Path(__file__).resolve().parents[1]
IDS = ("r1-zero", "r1", "distillation")
TOL = 0.006  # geometry is rounded to 2 decimals


@pytest.fixture(scope="module")
def payloads():
    client = TestClient(create_app())
    runs = {pid: client.get(f"/api/processes/{pid}").json() for pid in IDS}
    return runs, client.get("/api/processes/compare").json()


@pytest.fixture(scope="module")
def env():
    e = Environment(loader=FileSystemLoader(ROOT / "templates"), autoescape=True)
    e.globals["process_charts"] = pc
    return e


def make_panel(process, stage_id, comparison):
    url = lambda pid, sid=None: f"/?process={pid}" + (f"&stage={sid}" if sid else "")  # noqa: E731
    options = [SimpleNamespace(id="", title="GRPO walkthrough step (no training path)", url="/",
                               selected=process is None)]
    options += [SimpleNamespace(id=p["id"], title=p["title"], url=url(p["id"]),
                                selected=process is not None and p["id"] == process["id"])
                for p in comparison["processes"]]
    stage = next((s for s in process["stages"] if s["id"] == stage_id), None) if process else None
    return SimpleNamespace(
        options=options, process=process, stage=stage, comparison=comparison, form_action="/",
        stage_urls={s["id"]: url(process["id"], s["id"]) for s in process["stages"]} if process else {},
        hidden={"step": "advantages", "node": "ratio"},
    )


def render(env, panel) -> BeautifulSoup:
    return BeautifulSoup(env.get_template("_process_panel.html").render(panel=panel), "html.parser")


def all_cases(payloads):
    runs, cmp = payloads
    return [(runs[pid], s["id"]) for pid in IDS for s in runs[pid]["stages"]]


# ------------------------------------------------------------------ geometry


@pytest.mark.parametrize("pid", IDS)
def test_pipeline_boxes_arrows_and_selection(payloads, pid):
    run = payloads[0][pid]
    stages = run["stages"]
    for sel in [None] + [s["id"] for s in stages]:
        pl = pc.pipeline(run, sel)
        assert [b.id for b in pl.boxes] == [s["id"] for s in stages]
        assert len(pl.arrows) == len(stages) - 1 + 1  # + the arrow out of the starting checkpoint
        assert [a.target for a in pl.arrows] == [s["id"] for s in stages]
        assert [a.source for a in pl.arrows] == ["start"] + [s["id"] for s in stages[:-1]]
        assert [a.label.text for a in pl.arrows[1:]] == [s["output"] for s in stages[:-1]]
        assert [b.id for b in pl.boxes if b.selected] == ([sel] if sel else [])
        assert pl.selected == sel
        for b in pl.boxes:
            assert (b.selected_mark is not None) == b.selected == (b.ring is not None)
            assert b.x + b.width <= pl.width + TOL and b.y + b.height <= pl.height + TOL
        assert pl.start_name.text == stages[0]["start"]


def test_pipeline_kinds_differ_by_dash_and_handoffs(payloads):
    runs = payloads[0]
    dashes = {b.kind: b.dash for pid in IDS for b in pc.pipeline(runs[pid], None).boxes}
    assert set(dashes) == {"sft", "grpo", "rejection_sampling", "distill_sft"}
    assert len(set(dashes.values())) == 4 and dashes["grpo"] == ""
    r1 = pc.pipeline(runs["r1"], None)
    roles = [a.role.text for a in r1.arrows[1:]]
    assert roles == ["checkpoint", "checkpoint", "dataset", "checkpoint"]
    assert r1.boxes[3].from_note.text == "from base"  # SFT restarts from the base, not the RL checkpoint
    distill = pc.pipeline(runs["distillation"], None)
    assert distill.start_name.text == "r1" and distill.start_role.text == "teacher"
    assert distill.boxes[1].from_note.text == "from student-base"
    assert len({b.y for b in r1.boxes}) == 2  # five stages wrap to a second row


def sy(chart, v):
    lo, hi = chart.y_range
    return chart.plot_bottom - (v - lo) / (hi - lo) * (chart.plot_bottom - chart.plot_top)


def sx(chart, v):
    lo, hi = chart.x_range
    return chart.plot_left + (v - lo) / (hi - lo) * (chart.plot_right - chart.plot_left)


def test_curve_points_map_values_linearly(payloads):
    for run, sid in all_cases(payloads):
        stage = next(s for s in run["stages"] if s["id"] == sid)
        charts = pc.stage_curves(stage)
        if not stage["curve"]:
            assert charts == []
            continue
        keys = [c.key for c in charts]
        assert keys == ["reward", "accuracy", "language", "divergence", "loss"]
        by_key = {s.key: (c, s) for c in charts for s in c.series}
        assert ("train_reward" in by_key) == (stage["kind"] == "grpo")
        assert by_key["divergence"][0].title == f"Divergence from {stage['reference']}"
        c, s = by_key["eval_reward"]
        assert c.y_range == (0.0, 2.0)
        assert s.points[0] == (0.0, stage["start_metrics"]["eval_reward"])
        for chart, series in by_key.values():
            xy = [tuple(map(float, p.split(","))) for p in series.svg_points.split()]
            assert len(xy) == len(series.points)
            for (x, y), (i, v) in zip(xy, series.points):
                assert abs(y - sy(chart, v)) <= TOL and abs(x - sx(chart, i)) <= TOL
                assert chart.plot_top - TOL <= y <= chart.plot_bottom + TOL
            lab = series.label_text
            assert chart.plot_top <= lab.y <= chart.plot_bottom
        loss_chart, loss = by_key["loss"]
        assert [p[0] for p in loss.points] == [float(p["iteration"]) for p in stage["curve"]]
        lo, hi = loss_chart.y_range
        assert lo <= min(v for _i, v in loss.points) and hi >= max(v for _i, v in loss.points)
        if min(v for _i, v in loss.points) < 0:
            assert loss_chart.zero_y is not None and abs(loss_chart.zero_y - sy(loss_chart, 0.0)) <= TOL


def test_line_chart_negative_range_and_two_labels_apart():
    chart = pc.line_chart("t", "Test", "y", [("a", "first", [(0, -2.0), (1, 0.5), (2, 1.0)]),
                                             ("b", "second", [(1, 0.98), (2, 0.99)])])
    assert chart.y_range[0] < -2.0 < 1.0 < chart.y_range[1]
    assert chart.zero_y is not None and chart.plot_top < chart.zero_y < chart.plot_bottom
    assert chart.series[1].dashed and not chart.series[0].dashed
    assert abs(chart.series[0].label_text.y - chart.series[1].label_text.y) >= 12 - TOL
    ticks = [t.value for t in chart.y_ticks]
    assert min(ticks) >= chart.y_range[0] and max(ticks) <= chart.y_range[1]
    assert any(t.label.startswith("\u2212") for t in chart.y_ticks)  # Unicode minus


def test_comparison_bars_proportional_to_values(payloads):
    cmp = payloads[1]
    chart = pc.comparison(cmp)
    assert [g.key for g in chart.groups] == ["accuracy", "eval_reward", "divergence", "p_correct", "p_mixed"]
    for g in chart.groups:
        values = [p["final"][g.key] for p in cmp["processes"]]
        assert g.scale_max >= max(values)
        assert [b.process_id for b in g.bars] == [p["id"] for p in cmp["processes"]]
        assert [b.pattern for b in g.bars] == [0, 1, 2]
        for b, v in zip(g.bars, values):
            assert abs(b.width - v / g.scale_max * g.track_width) <= TOL
            assert b.name.text == next(p["title"] for p in cmp["processes"] if p["id"] == b.process_id)
            assert b.value_text.text == pc.fmt(v)
    assert {g.scale_max for g in chart.groups if g.key in ("accuracy", "p_correct", "p_mixed")} == {1.0}


def test_wrap_and_notes():
    assert pc.wrap("Reasoning-oriented GRPO", 15) == ["Reasoning-", "oriented GRPO"]
    assert all(len(line) <= 10 for line in pc.wrap("a very long title that keeps going on", 10, 2))
    assert pc.wrap("a very long title that keeps going on", 10, 2)[-1].endswith("…")
    stage = {"start": "r1-rl", "sampled": 96, "dataset_size": 74, "samples_per_prompt": 16}
    assert pc.sampling_note(stage).startswith("No training: this stage samples 16 answers per prompt")
    assert "keeps 74 of 96" in pc.sampling_note(stage)
    assert pc.role_rows({"reward_by_role": {"wrong": 0.5, "correct": 1.5}}) == \
        [("readable correct", "1.5"), ("wrong", "0.5")]


# ------------------------------------------------------------------ template


def check_common(soup, panel):
    assert soup.select_one("section.process-panel[aria-labelledby=process-title] h2#process-title")
    form = soup.select_one("form.process-form[method=get][hx-trigger=change]")
    assert form["action"] == panel.form_action and form["hx-target"] == "#view"
    assert {i["name"]: i["value"] for i in form.select("input[type=hidden]")} == panel.hidden
    assert soup.select_one("label[for=process-select]").get_text() == "Process"
    options = soup.select("select#process-select[name=process] option")
    assert [o["value"] for o in options] == [o.id for o in panel.options]
    assert [o.has_attr("selected") for o in options] == [o.selected for o in panel.options]
    assert form.select_one("noscript button[type=submit]")
    links = soup.select("nav[aria-label=Processes] a[hx-get][hx-push-url=true]")
    assert [a["href"] for a in links] == [o.url for o in panel.options]
    assert [a.get("aria-current") for a in links] == ["true" if o.selected else None for o in panel.options]
    assert not soup.select("[style]") and not soup.select("script")
    assert not [t for t in soup.find_all(True) if any(a.lower().startswith("on") for a in t.attrs)]
    for svg in soup.select("svg"):
        assert svg.get("role") in ("img", "group") and svg.get("aria-label") and svg.find("title")
        ET.fromstring(str(svg))  # well-formed XML
    charts = [s for s in soup.select("svg") if "pipeline-svg" not in s["class"]]
    assert all(s["role"] == "img" for s in charts)
    cmp = soup.select_one("section.process-compare svg.comparison-svg")
    assert len(cmp.select("g.compare-group")) == 5
    for g in cmp.select("g.compare-group"):
        assert [b["data-process-id"] for b in g.select("g.compare-bar")] == list(IDS)
    assert len(soup.select(".process-compare .paper-results dd")) == 3
    assert "Toy numbers" in soup.select_one(".compare-note").get_text()


@pytest.mark.parametrize("pid", IDS)
def test_panel_renders_every_stage(payloads, env, pid):
    run, cmp = payloads[0][pid], payloads[1]
    for stage in run["stages"]:
        panel = make_panel(run, stage["id"], cmp)
        soup = render(env, panel)
        check_common(soup, panel)
        ids = [s["id"] for s in run["stages"]]
        svg_links = soup.select("svg.pipeline-svg a.stage-link[data-stage-id]")
        assert [a["data-stage-id"] for a in svg_links] == ids
        assert [a["href"] for a in svg_links] == [panel.stage_urls[i] for i in ids]
        assert all(a["hx-get"] == a["href"] and a["aria-label"].startswith("Stage ") for a in svg_links)
        assert [a["data-stage-id"] for a in soup.select("svg a.stage-link.is-selected")] == [stage["id"]]
        assert "▶ selected" in soup.select_one("svg a.stage-link.is-selected").get_text()
        list_links = soup.select("ol.stage-list a[data-stage-id]")
        assert [a["data-stage-id"] for a in list_links] == ids
        assert [a["data-stage-id"] for a in soup.select("ol.stage-list a[aria-current=step]")] == [stage["id"]]
        card = soup.select_one("article.stage-card")
        labels = [h.get_text() for h in card.select(".fact-col h4")]
        assert labels == [f"In the paper ({stage['paper']['section']})", "Toy analogue"]
        assert card.select_one(".fact-paper p").get_text() == stage["paper"]["fact"]
        assert card.select_one(".fact-toy p").get_text() == stage["toy_analogue"]
        assert bool(card.select("table.reward-table")) == bool(stage["reward_by_role"])
        curves = soup.select(".stage-curves svg.curve-svg")
        if stage["kind"] == "rejection_sampling":
            assert not curves
            note = soup.select_one(".stage-curves p.no-training").get_text()
            assert note.startswith("No training") and f"keeps {stage['dataset_size']} of {stage['sampled']}" in note
            kept = f"kept {stage['dataset_size']} of {stage['sampled']} samples"
            assert card.select_one("dd.kept").get_text() == kept
        else:
            assert len(curves) == 5
            assert soup.select_one('[data-chart=language] [data-series=p_mixed] polyline[stroke-dasharray]')
            labels = [t.get_text() for t in soup.select("[data-chart=language] text.series-label")]
            assert labels == ["readable correct", "mixed language"]
            assert bool(soup.select("[data-series=train_reward]")) == (stage["kind"] == "grpo")
            pairs = card.select_one("dd.pairs")
            if stage["kind"] == "grpo":
                assert pairs is None
            else:
                assert pairs.get_text().startswith(f"{stage['dataset_size']} training pairs from")


def test_panel_without_process(payloads, env):
    panel = make_panel(None, None, payloads[1])
    soup = render(env, panel)
    check_common(soup, panel)
    assert not soup.select(".pipeline-svg, ol.stage-list, article.stage-card")
    assert soup.select_one("option[value='']").has_attr("selected")


def test_panel_without_stage(payloads, env):
    run = payloads[0]["r1"]
    soup = render(env, make_panel(run, None, payloads[1]))
    assert len(soup.select("svg a.stage-link")) == 5 and not soup.select("a.is-selected, [aria-current=step]")
    assert not soup.select("article.stage-card") and soup.select_one(".process-intro h3").get_text() == "DeepSeek-R1"


def test_data_is_escaped(payloads, env):
    run = copy.deepcopy(payloads[0]["r1"])
    evil = '<script>alert("x")</script>'
    run["stages"][1]["title"] = evil
    run["stages"][1]["toy_analogue"] = evil
    cmp = copy.deepcopy(payloads[1])
    cmp["processes"][0]["title"] = evil
    html = env.get_template("_process_panel.html").render(panel=make_panel(run, run["stages"][1]["id"], cmp))
    assert "<script>" not in html and "&lt;script&gt;" in html
    soup = BeautifulSoup(html, "html.parser")
    assert not soup.select("script")
    for svg in soup.select("svg"):
        ET.fromstring(str(svg))
    assert evil in soup.select_one("article.stage-card h3").get_text()
    assert math.isfinite(pc.comparison(cmp).height)
