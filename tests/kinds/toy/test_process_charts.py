"""Training-path panel: geometry (app/views/charts/pipeline.py, line_charts.py, comparison.py)
against independent arithmetic, and templates/toy/process_panel.html rendered from the real
panel of all three paths: selectors, links, accessibility, CSP-clean, well-formed SVG, escaping."""
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from bs4 import BeautifulSoup
from jinja2 import Environment, FileSystemLoader
from paths import PROCESSES_PATH, ROOT, SEED_PATH, TEMPLATES
from runs import start_toy_paths

from app.domain.snapshot import load_snapshot
from app.house import KINDS
from app.kinds.toy.domain.process_spec import load_processes, parse_processes
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.processes import run_process
from app.kinds.toy.engine.step_inputs import obtain
from app.kinds.toy.views.charts.comparison import comparison
from app.kinds.toy.views.charts.pipeline import pipeline
from app.kinds.toy.views.charts.stage_curves import stage_curves
from app.kinds.toy.views.process_panel import build_process_panel, reward_rows, sampling_note
from app.kinds.toy.views.url_state import parse_view
from app.views.charts.frame import wrap
from app.views.charts.line_charts import line_chart
from app.views.numbers import significant

IDS = ("r1-zero", "r1", "distillation")
TOL = 0.006  # geometry is rounded to 2 decimals
CATALOG = load_processes(PROCESSES_PATH)
SNAPSHOT = load_snapshot(SEED_PATH)


# the panel waits on its path's run, a job: each test has a job client and store of its own (tests/conftest.py)
_jobs: list = []


@pytest.fixture(autouse=True)
def _own_jobs(job_client):
    _jobs.append(job_client)
    yield
    _jobs.remove(job_client)


@pytest.fixture(scope="module")
def runs():
    return {pid: run_process(CATALOG, pid, 0) for pid in IDS}


@pytest.fixture(scope="module")
def env():
    return Environment(loader=FileSystemLoader([TEMPLATES, *(k.templates for k in KINDS if k.templates)]), autoescape=True)


def make_panel(process_id, stage_id=None, catalog=CATALOG):
    state = parse_view(SNAPSHOT, "toy_grpo", "advantages", expanded=None, node="ratio", params=GRPOParams(seed=0),
                            process=process_id, stage=stage_id, processes=catalog)
    if process_id:
        start_toy_paths(_jobs[-1], catalog, 0)  # the Run button's work: a read never starts a run
    runs = obtain(state.own.params, "cpu", catalog, process_id, stage_id, jobs=_jobs[-1]).runs if process_id else {}
    return build_process_panel(SNAPSHOT, state, catalog, runs)


def render(env, panel) -> BeautifulSoup:
    return BeautifulSoup(env.get_template("toy/process_panel.html").render(panel=panel), "html.parser")


def all_cases(runs):
    return [(runs[pid], s.stage.id) for pid in IDS for s in runs[pid].stages]


# ------------------------------------------------------------------ geometry


@pytest.mark.parametrize("pid", IDS)
def test_pipeline_boxes_arrows_and_selection(pid):
    process = CATALOG.get(pid)
    stages = process.stages
    for sel in [None] + [s.id for s in stages]:
        pl = pipeline(process, sel)
        assert [b.id for b in pl.boxes] == [s.id for s in stages]
        assert len(pl.arrows) == len(stages) - 1 + 1  # + the arrow out of the starting checkpoint
        assert [a.target for a in pl.arrows] == [s.id for s in stages]
        assert [a.source for a in pl.arrows] == ["start"] + [s.id for s in stages[:-1]]
        assert [a.label.text for a in pl.arrows[1:]] == [s.output for s in stages[:-1]]
        assert [b.id for b in pl.boxes if b.selected] == ([sel] if sel else [])
        assert pl.selected == sel
        for b in pl.boxes:
            assert (b.selected_mark is not None) == b.selected == (b.ring is not None)
            assert b.x + b.width <= pl.width + TOL and b.y + b.height <= pl.height + TOL
        assert pl.start_name.text == stages[0].start


def test_pipeline_kinds_differ_by_dash_and_handoffs():
    dashes = {b.kind: b.dash for pid in IDS for b in pipeline(CATALOG.get(pid), None).boxes}
    assert set(dashes) == {"sft", "grpo", "rejection_sampling", "distill_sft"}
    assert len(set(dashes.values())) == 4 and dashes["grpo"] == ""
    r1 = pipeline(CATALOG.get("r1"), None)
    roles = [a.role.text for a in r1.arrows[1:]]
    assert roles == ["checkpoint", "checkpoint", "dataset", "checkpoint"]
    assert r1.boxes[3].from_note.text == "from base"  # SFT restarts from the base, not the RL checkpoint
    distill = pipeline(CATALOG.get("distillation"), None)
    assert distill.start_name.text == "r1" and distill.start_role.text == "teacher"
    assert distill.boxes[1].from_note.text == "from student-base"
    assert len({b.y for b in r1.boxes}) == 2  # five stages wrap to a second row


NARROW = """
from app.kinds.toy.domain.process_spec import load_processes
from app.kinds.toy.views.charts.pipeline import pipeline
import sys
from pathlib import Path
catalog = load_processes(Path(sys.argv[1]))
for pid in sys.argv[2:]:
    pipeline(catalog.get(pid), None, width=360)
print("returned")
"""


def test_a_phone_width_pipeline_returns_and_fits():
    """At 360 units (a phone's column) the boxes were 8 wide and the title wrap never ended: a
    subprocess, so that a loop fails the test instead of hanging the suite."""
    done = subprocess.run([sys.executable, "-c", NARROW, str(PROCESSES_PATH), *IDS], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.strip() == "returned", done.stderr
    for pid in IDS:
        for sel in [None, CATALOG.get(pid).stages[-1].id]:
            pl = pipeline(CATALOG.get(pid), sel, width=360)
            assert pl.width <= 360 + TOL, (pid, pl.width)
            assert len({b.x for b in pl.boxes}) == 1, pid          # one box a row
            for b in pl.boxes:
                assert b.x >= 0 and b.x + b.width <= pl.width + TOL and b.y + b.height <= pl.height + TOL
                assert b.badge.text.startswith(f"{b.number} · ")
                assert len(b.badge.text) * 6.0 + 12 <= b.width + TOL, b.badge.text   # the badge fits its box
                assert all(len(t.text) * 6.6 + 12 <= b.width + TOL for t in b.title_lines), b.title_lines


def test_wrap_refuses_a_width_of_no_characters():
    with pytest.raises(ValueError):
        wrap("Cold-start SFT", 0)


def sy(chart, v):
    lo, hi = chart.y_range
    return chart.plot_bottom - (v - lo) / (hi - lo) * (chart.plot_bottom - chart.plot_top)


def sx(chart, v):
    lo, hi = chart.x_range
    return chart.plot_left + (v - lo) / (hi - lo) * (chart.plot_right - chart.plot_left)


def test_curve_points_map_values_linearly(runs):
    for run, sid in all_cases(runs):
        stage = run.stage(sid)
        charts = stage_curves(stage)
        if not stage.curve:
            assert charts == []
            continue
        keys = [c.key for c in charts]
        assert keys == ["reward", "accuracy", "language", "divergence", "loss"]
        by_key = {s.key: (c, s) for c in charts for s in c.series}
        assert ("train_reward" in by_key) == (stage.stage.kind == "grpo")
        assert by_key["divergence"][0].title == f"Divergence from {stage.stage.reference}"
        c, s = by_key["eval_reward"]
        assert c.y_range == (0.0, 2.0)
        assert s.points[0] == (0.0, stage.start_metrics.eval_reward)
        for chart, series in by_key.values():
            xy = [tuple(map(float, p.split(","))) for p in series.svg_points.split()]
            assert len(xy) == len(series.points)
            for (x, y), (i, v) in zip(xy, series.points, strict=True):
                assert abs(y - sy(chart, v)) <= TOL and abs(x - sx(chart, i)) <= TOL
                assert chart.plot_top - TOL <= y <= chart.plot_bottom + TOL
            lab = series.label_text
            assert chart.plot_top <= lab.y <= chart.plot_bottom
        loss_chart, loss = by_key["loss"]
        assert [p[0] for p in loss.points] == [float(p.iteration) for p in stage.curve]
        lo, hi = loss_chart.y_range
        assert lo <= min(v for _i, v in loss.points) and hi >= max(v for _i, v in loss.points)
        if min(v for _i, v in loss.points) < 0:
            assert loss_chart.zero_y is not None and abs(loss_chart.zero_y - sy(loss_chart, 0.0)) <= TOL


def test_line_chart_negative_range_and_two_labels_apart():
    chart = line_chart("t", "Test", "y", [("a", "first", [(0, -2.0), (1, 0.5), (2, 1.0)]),
                                             ("b", "second", [(1, 0.98), (2, 0.99)])])
    assert chart.y_range[0] < -2.0 < 1.0 < chart.y_range[1]
    assert chart.zero_y is not None and chart.plot_top < chart.zero_y < chart.plot_bottom
    assert chart.series[1].dashed and not chart.series[0].dashed
    assert abs(chart.series[0].label_text.y - chart.series[1].label_text.y) >= 12 - TOL
    ticks = [t.value for t in chart.y_ticks]
    assert min(ticks) >= chart.y_range[0] and max(ticks) <= chart.y_range[1]
    assert any(t.label.startswith("\u2212") for t in chart.y_ticks)  # Unicode minus


def test_labels_beside_the_plot_keep_apart_and_styles_differ_without_colour():
    close = [(f"s{k}", f"line {k}", [(0, 0.1 * k), (10, 0.5 + 0.001 * k)]) for k in range(5)]
    chart = line_chart("t", "T", "y", close, (0.0, 1.0), 340, 180, gutter=True, legend=False,
                       marks=[(5, "2")], caption="")
    ys = sorted(s.label_text.y for s in chart.series)
    assert all(b - a >= 14 - 1e-9 for a, b in zip(ys, ys[1:], strict=False))  # an 11 px line is ~13 px tall
    assert all(s.label_text.x > chart.plot_right and s.label_text.anchor == "start" for s in chart.series)
    assert max(s.label_text.x + len(s.label) * 6.2 for s in chart.series) <= chart.width + 1
    assert len({(s.dash, s.marker) for s in chart.series}) == 5
    assert chart.caption == "" and [m.label.text for m in chart.marks] == ["2"]
    assert chart.plot_left < chart.marks[0].x < chart.plot_right
    assert [m.x for m in line_chart("u", "U", "y", close, marks=[(0, "1"), (20, "9")]).marks] == []  # outside: none


def test_comparison_bars_proportional_to_values(runs):
    finals = [(CATALOG.get(pid), runs[pid].final) for pid in IDS]
    chart = comparison(finals)
    assert [g.key for g in chart.groups] == ["accuracy", "eval_reward", "divergence", "p_correct", "p_mixed"]
    for g in chart.groups:
        values = [getattr(final, g.key) for _p, final in finals]
        assert g.scale_max >= max(values)
        assert [b.process_id for b in g.bars] == list(IDS)
        assert [b.pattern for b in g.bars] == [0, 1, 2]
        for b, v in zip(g.bars, values, strict=True):
            assert abs(b.width - v / g.scale_max * g.track_width) <= TOL
            assert b.name.text == CATALOG.get(b.process_id).title
            assert b.value_text.text == significant(v)
    assert {g.scale_max for g in chart.groups if g.key in ("accuracy", "p_correct", "p_mixed")} == {1.0}


def test_wrap_and_notes(runs):
    assert wrap("Reasoning-oriented GRPO", 15) == ["Reasoning-", "oriented GRPO"]
    assert all(len(line) <= 10 for line in wrap("a very long title that keeps going on", 10, 2))
    assert wrap("a very long title that keeps going on", 10, 2)[-1].endswith("…")
    sampling = runs["r1"].stage("rejection-sampling")
    per, kept = sampling.stage.samples_per_prompt, len(sampling.dataset)
    assert sampling_note(sampling).startswith(f"No training: this stage samples {per} answers per prompt")
    assert f"keeps {kept} of {sampling.sampled}" in sampling_note(sampling)
    assert sampling.sampled == per * 6 and 0 < kept < sampling.sampled
    # accuracy + format: 1.5 for both right answers, 0.5 for a formatted wrong one, 0 unformatted
    assert reward_rows(CATALOG.get("r1-zero").stages[0]) == (
        ("readable correct", "1.5"), ("mixed-language correct", "1.5"), ("right but unformatted", "0"),
        ("wrong", "0.5"))
    assert reward_rows(CATALOG.get("r1").stage("cold-start")) == ()


# ------------------------------------------------------------------ template


def check_common(soup, panel):
    assert soup.select_one("section.process-panel[aria-labelledby=process-title] h2#process-title")
    # submitted by its button, not on change: arrow keys on a closed <select> fire change
    form = soup.select_one("form.process-form[method=get]")
    assert not form.has_attr("hx-trigger")
    assert form["action"] == panel.form_action and form["hx-target"] == "#view"
    assert {i["name"]: i["value"] for i in form.select("input[type=hidden]")} == panel.hidden
    assert soup.select_one("label[for=process-select]").get_text() == "Process"
    options = soup.select("select#process-select[name=process] option")
    assert [o["value"] for o in options] == [o.id for o in panel.options]
    assert [o.has_attr("selected") for o in options] == [o.selected for o in panel.options]
    assert form.select_one("button[type=submit]#process-show").get_text() == "Show this path"
    # the paths are offered once, by this selector: no second row of links (issue 20)
    assert not soup.select("nav[aria-label=Processes]")
    assert not soup.select("[style]") and not soup.select("script")
    assert not [t for t in soup.find_all(True) if any(a.lower().startswith("on") for a in t.attrs)]
    for svg in soup.select("svg"):
        assert svg.get("role") in ("img", "group") and svg.get("aria-label") and svg.find("title")
        ET.fromstring(str(svg))  # well-formed XML
    charts = [s for s in soup.select("svg") if "pipeline-svg" not in s["class"]]
    assert all(s["role"] == "img" for s in charts)
    cmp = soup.select_one("section.process-compare svg.comparison-svg")
    if panel.process is None:
        return
    assert len(cmp.select("g.compare-group")) == 5
    for g in cmp.select("g.compare-group"):
        assert [b["data-process-id"] for b in g.select("g.compare-bar")] == list(IDS)
    assert len(soup.select(".process-compare .paper-results dd")) == 3
    assert "Toy numbers" in soup.select_one(".compare-note").get_text()


@pytest.mark.parametrize("pid", IDS)
def test_panel_renders_every_stage(runs, env, pid):
    process = CATALOG.get(pid)
    for stage in process.stages:
        panel = make_panel(pid, stage.id)
        soup = render(env, panel)
        check_common(soup, panel)
        ids = [s.id for s in process.stages]
        svg_links = soup.select("svg.pipeline-svg a.stage-link[data-stage-id]")
        assert [a["data-stage-id"] for a in svg_links] == ids
        assert [a["href"] for a in svg_links] == [panel.stage_urls[i] for i in ids]
        assert all(a["hx-get"] == a["href"] and a["aria-label"].startswith("Stage ") for a in svg_links)
        assert [a["data-stage-id"] for a in soup.select("svg a.stage-link.is-selected")] == [stage.id]
        assert "▶ selected" in soup.select_one("svg a.stage-link.is-selected").get_text()
        list_links = soup.select("ol.stage-list a[data-stage-id]")
        assert [a["data-stage-id"] for a in list_links] == ids
        assert [a["data-stage-id"] for a in soup.select("ol.stage-list a[aria-current=step]")] == [stage.id]
        # the last stage is the default: its link carries no stage= (one URL per view)
        assert ("stage=" in panel.stage_urls[ids[-1]], "stage=" in panel.stage_urls[ids[0]]) == (False, len(ids) > 1)
        card = soup.select_one("article.stage-card")
        labels = [h.get_text() for h in card.select(".fact-col h4")]
        assert labels == [f"In the paper ({stage.paper_section})", "Toy analogue"]
        assert card.select_one(".fact-paper p").get_text() == stage.paper
        assert card.select_one(".fact-ours p").get_text() == stage.toy
        assert bool(card.select("table.reward-table")) == bool(stage.reward)
        run = runs[pid].stage(stage.id)
        curves = soup.select(".stage-curves svg.curve-svg")
        if stage.kind == "rejection_sampling":
            assert not curves
            note = soup.select_one(".stage-curves p.no-training").get_text()
            assert note.startswith("No training") and f"keeps {len(run.dataset)} of {run.sampled}" in note
            kept = f"kept {len(run.dataset)} of {run.sampled} samples"
            assert card.select_one("dd.kept").get_text() == kept
        else:
            assert len(curves) == 5
            assert soup.select_one('[data-chart=language] [data-series=p_mixed] polyline[stroke-dasharray]')
            labels = [t.get_text() for t in soup.select("[data-chart=language] text.series-label")]
            assert labels == ["readable correct", "mixed language"]
            assert bool(soup.select("[data-series=train_reward]")) == (stage.kind == "grpo")
            pairs = card.select_one("dd.pairs")
            if stage.kind == "grpo":
                assert pairs is None
            else:
                assert pairs.get_text().startswith(f"{len(run.dataset)} training pairs from")


def test_panel_without_process(env):
    panel = make_panel(None)
    soup = render(env, panel)
    assert soup.select_one("option[value='']").has_attr("selected")
    assert not soup.select(".pipeline-svg, ol.stage-list, article.stage-card, section.process-compare")
    assert "Pick a path" in soup.select_one(".compare-note").get_text()  # three runs only once asked for


def test_data_is_escaped(env):
    evil = '<script>alert("x")</script>'
    text = PROCESSES_PATH.read_text(encoding="utf-8")
    text = text.replace('title = "DeepSeek-R1-Zero"', f"title = '{evil}'", 1)
    text = text.replace('toy = "', f"toy = '{evil}' # \"", 1)
    catalog = parse_processes(text)
    assert catalog.get("r1-zero").title == evil and catalog.get("r1-zero").stages[0].toy == evil
    panel = make_panel("r1-zero", None, catalog)
    html = env.get_template("toy/process_panel.html").render(panel=panel)
    assert "<script>" not in html and "&lt;script&gt;" in html
    soup = BeautifulSoup(html, "html.parser")
    assert not soup.select("script")
    for svg in soup.select("svg"):
        ET.fromstring(str(svg))
    assert evil in soup.select_one(".process-intro h3").get_text()
    assert evil in soup.select_one(".fact-ours p").get_text()
    assert math.isfinite(panel.comparison.chart.height)


@pytest.mark.parametrize("process_id, stage_id, right, wrong", [
    ("r1-zero", "rl", "right but unformatted 0 (accuracy 0, format 0)", "wrong 0.5 (accuracy 0, format 0.5)"),
    ("r1", "reasoning-rl", "right but unformatted 0.5 (accuracy 0, format 0, language 0.5)",
     "wrong 1 (accuracy 0, format 0.5, language 0.5)"),
])
def test_a_rule_that_pays_a_right_answer_less_than_a_wrong_one_says_why(process_id, stage_id, right, wrong):
    from app.kinds.toy.views.process_panel import reward_why

    why = reward_why(CATALOG.get(process_id).stage(stage_id))
    assert right in why and f"against {wrong}" in why and "cannot be parsed" in why


def test_a_rule_that_pays_every_right_answer_at_least_the_wrong_one_says_nothing():
    from app.kinds.toy.domain.rewards import role_rewards
    from app.kinds.toy.views.process_panel import RIGHT, reward_why

    for process in CATALOG.processes:
        for stage in process.stages:
            paid = role_rewards(stage.reward) if stage.reward else {}
            below = any(paid[r] < paid["wrong"] for r in RIGHT) if paid else False
            assert bool(reward_why(stage)) == below, (process.id, stage.id)


def test_the_stage_card_shows_why_under_its_reward_table(env, job_client):
    card = render(env, make_panel("r1-zero"))
    why = card.select_one(".reward-table + .reward-why")
    assert why is not None and "right but unformatted 0" in why.get_text()
    assert render(env, make_panel(None)).select_one(".reward-why") is None  # no path chosen: no card


def test_every_pipeline_box_keeps_its_number():
    """R1's third box read "Rejection sampling" without its "3 ·" where the box was narrow."""
    for pid in IDS:
        for box in pipeline(CATALOG.get(pid), None).boxes:
            assert box.badge.text.startswith(f"{box.number} · "), (pid, box.badge.text)
