"""The paths box's length view (issue 22), from results built by hand (tests/lm_fakes.py): every
sentence says what its numbers do, whichever way they go, and the box puts the point first."""
from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from lm_fakes import BASE, GROWN, fake_result, with_final

from app.domain.training_paths import PATH_IDS
from app.house import registry
from app.kinds.tiny_lm.engine.lm_plans import DR_GRPO
from app.kinds.tiny_lm.views.dr_grpo_view import SAME, build_dr_grpo_view, dr_grpo_sentence
from app.kinds.tiny_lm.views.habits_view import build_showcase, build_start_habits
from app.kinds.tiny_lm.views.length_view import along_path, build_length_view
from app.kinds.tiny_lm.views.lm_path_panel import build_path_panel
from app.kinds.tiny_lm.views.overlay_view import OVERLAY_METRICS, build_overlay
from app.stores.jobs import JobRecord
from app.web.rendering import make_templates

FELL = {**BASE, "accuracy": 0.20, "mean_length": 11.0, "mean_length_correct": 9.0, "stepwise_share": 0.05}


def job(state: str = "done", path: str = "r1-zero", fraction: float = 1.0) -> JobRecord:
    return JobRecord(id=f"{path}-{state}".ljust(32, "0"), kind="tiny_lm", task="lm_path",
                     params={"path": path, "seed": 3}, code_version="v", title=path, state=state, runner="r",
                     attempts=1, stage="rl" if state == "running" else state, step=20, done=20, total=60,
                     fraction=fraction, error="ValueError: boom" if state == "failed" else None, created_at=0.0,
                     started_at=0.0, finished_at=None, seconds=12.3 if state == "done" else None, device="cpu",
                     history="")


# -- the headline ---------------------------------------------------------------------------------

def test_the_headline_says_accuracy_rose_and_answers_grew_when_they_did():
    view = build_length_view(fake_result(start=BASE, end=GROWN, hard_shift=-0.01))
    assert view.headline == ("Accuracy rose 31% → 62% while answers grew from 16.7 to 27.9 tokens (correct ones +73%); "
                             "step-by-step answers rose 25% → 99% (on 6-number sums 24% → 98%).")
    assert "Figure 3" in view.label and "reward-driven length growth on a task where steps help" in view.label
    assert "aha moment" in view.label and "does not" not in view.label


def test_the_reading_says_when_the_growth_came():
    steady = build_length_view(fake_result())  # linear: 80% of it at 48, the first point past it at 50
    assert steady.why.endswith("The growth runs through the run (80% of it by step 50 of 60), as in Figure 3.")
    early = build_length_view(fake_result(pace=lambda t: min(1.0, 3 * t)))  # all of it in the first third
    assert early.why.endswith("Most of the growth (80%) came by step 20 of 60, then the length stays about flat: "
                              "not Figure 3's steady climb.")
    assert "Figure 3" not in build_length_view(fake_result(start=GROWN, end=BASE)).why  # no growth: no pace


def test_the_headline_says_accuracy_fell_and_answers_shrank_when_they_did():
    view = build_length_view(fake_result(start=GROWN, end=BASE))
    assert view.headline.startswith("Accuracy fell 62% → 31% while answers shrank from 27.9 to 16.7 tokens "
                                    "(correct ones \u221242%); step-by-step answers fell 99% → 25%")
    for claim in ("rose", "grew", "+"):
        assert claim not in view.headline
    assert view.label == "Accuracy did not rise: this run does not reproduce R1-Zero's Figure 3."


def test_the_headline_follows_each_number_on_its_own():
    # accuracy up, length down: both said, and Figure 3 not claimed
    view = build_length_view(fake_result(start=BASE, end={**FELL, "accuracy": 0.5}))
    assert view.headline.startswith("Accuracy rose 31% → 50% while answers shrank from 16.7 to 11.0 tokens")
    assert "step-by-step answers fell 25% → 5%" in view.headline
    assert view.label.startswith("Accuracy rose without longer answers: this run does not reproduce")
    # nothing moved: "held" and "kept their length", with the numbers
    still = build_length_view(fake_result(start=BASE, end={**BASE, "mean_length": 16.9}))
    assert still.headline.startswith("Accuracy held (31% → 31%) while answers kept their length (16.7 → 16.9 tokens)")
    # longer and more accurate, but not by working step by step: not Figure 3's reason
    odd = build_length_view(fake_result(start=BASE, end={**GROWN, "stepwise_share": 0.25}))
    assert "step-by-step answers held (25% → 25%)" in odd.headline
    assert odd.label.endswith("but not through more step-by-step answers.")


def test_no_correct_answer_at_one_end_is_said_not_divided():
    view = build_length_view(with_final(fake_result(), mean_length_correct=None))
    assert "(no correct answer at the end to compare)" in view.headline


def test_r1_and_distillation_are_not_labelled_reward_driven():
    for path in ("r1", "distillation"):
        view = build_length_view(fake_result(path))
        assert "Figure 3" not in view.label and "reward-driven" not in view.label
    assert "no RL" in build_length_view(fake_result("distillation")).label


# -- what the curves start from ------------------------------------------------------------------

def test_distillation_curves_start_at_the_student_and_r1_marks_its_stage_starts():
    distill = fake_result("distillation")
    along = along_path(distill)
    assert along.skipped == "R1's outputs" and along.points[0][1] == "student_sft"
    view = build_length_view(distill)
    assert view.skipped == "R1's outputs" and view.accuracy.series[0].points[0] == (0.0, BASE["accuracy"])
    r1 = build_length_view(fake_result("r1"))
    # cold start 30, RL 40, rejection sampling (no step) and the SFT both at 70, final RL at 150
    assert [m.label.text for m in r1.length.marks] == ["2", "3, 4", "5"]
    assert "2 Reasoning-oriented RL at 30" in r1.length.caption and "5 RL for all scenarios at 150" in r1.length.caption
    assert build_length_view(fake_result()).length.marks == ()  # one stage: nothing to mark


def test_the_start_habits_and_the_showcase_are_read_from_the_completions():
    result = fake_result()
    habits = build_start_habits(result)
    assert habits.title == "What the base does before RL"
    assert habits.sentence.startswith("Before any training step, the base writes running sums in 25% of its answers")
    assert "those are right 80% of the time, its guesses 30%: working step by step already pays" in habits.sentence
    assert "2% of its answers re-check a step" in habits.sentence
    assert [r.n for r in habits.rows] == [2, 3, 4, 5, 6]
    worse = build_start_habits(fake_result(start={**BASE, "accuracy_stepwise": 0.2}))
    assert "does not pay more than guessing" in worse.sentence
    show = build_showcase(result)
    assert show is not None and (show.answer, show.numbers) == (30, 6)
    assert [(i.right, i.habit) for i in show.early] == [(False, "guess"), (True, "step by step (5 steps)"),
                                                        (True, "guess"), (False, "no template")]
    assert [(i.right, i.habit) for i in show.late] == [(True, "step by step (5 steps)"),
                                                       (True, "step by step (6 steps, 1 re-check)"),
                                                       (False, "step by step (5 steps)"),
                                                       (True, "step by step (5 steps)")]
    assert show.tally(show.late) == "3 of 4 right, 4 step by step"


# -- GRPO against Dr. GRPO -----------------------------------------------------------------------

def test_the_dr_grpo_sentence_agrees_only_when_grpo_grew_the_wrong_answers_more():
    grpo = fake_result()  # incorrect 17.5 -> 31.0
    flat = fake_result(end={**GROWN, "mean_length_incorrect": 18.0})  # 17.5 -> 18.0
    agrees = dr_grpo_sentence(grpo, flat)
    assert agrees.startswith("Incorrect answers went 17.5 → 31.0 tokens under GRPO (182 wrong at the end) and "
                             "17.5 → 18.0 under Dr. GRPO (182 wrong)")
    assert "Liu et al. 2025 (Dr. GRPO, arXiv 2503.20783) report" in agrees
    assert agrees.endswith("this run agrees: incorrect answers grew 13.5 tokens under GRPO against 0.5 under Dr. GRPO.")
    opposite = dr_grpo_sentence(flat, grpo)
    assert "agrees" not in opposite and opposite.endswith(
        "this run shows the opposite: incorrect answers changed 0.5 tokens under GRPO against 13.5 under Dr. GRPO.")
    # both grew, GRPO's a little more: the direction only, and said so (issue 22's measured case)
    both = fake_result(end={**GROWN, "mean_length_incorrect": 28.0})  # 17.5 -> 28.0
    partly = dr_grpo_sentence(grpo, both)
    assert partly.endswith("this run agrees in direction only: incorrect answers grew under both (13.5 tokens under "
                           "GRPO, 10.5 under Dr. GRPO), GRPO's by 3.0 more, small beside the growth both share.")
    near = fake_result(end={**GROWN, "mean_length_incorrect": 31.0 - SAME / 2})
    same = dr_grpo_sentence(grpo, near)
    assert "agrees" not in same and "this run shows no clear difference" in same
    shrank = fake_result(end={**GROWN, "mean_length_incorrect": 12.0})
    both_down = dr_grpo_sentence(shrank, fake_result(end={**GROWN, "mean_length_incorrect": 6.0}))
    assert "agrees" not in both_down and "\u22125.5 tokens under GRPO against \u221211.5" in both_down
    none = dr_grpo_sentence(grpo, with_final(flat, mean_length_incorrect=None))
    assert none.endswith("this run cannot say: one of them sampled no incorrect answer at its start or end.")


def test_the_dr_grpo_view_overlays_both_runs_or_waits_for_its_own():
    grpo = fake_result()
    dr = fake_result(end={**GROWN, "mean_length_incorrect": 18.0}, conventions=DR_GRPO)
    done = build_dr_grpo_view(grpo, job(), dr, "/poll", "/retry")
    assert [c.key for c in done.charts] == ["lm-dr-incorrect", "lm-dr-correct"]
    assert all([s.label for s in c.series] == ["GRPO", "Dr. GRPO"] for c in done.charts)
    assert done.charts[0].series[1].points[-1] == (60.0, 18.0)
    # the conventions are read from each run's result: only the aggregation and the std differ
    assert done.poll_url is None and done.note == (
        "GRPO here: each answer's token mean (1/|o_i|), advantages scaled by the group's std, β 0.001. "
        "Dr. GRPO (preset dr_grpo): token sums over a constant 56 tokens, advantages only centred, β 0.001.")
    waiting = build_dr_grpo_view(grpo, job("running"), None, "/poll", "/retry")
    assert waiting.poll_url == "/poll" and waiting.retry_url is None and not waiting.charts
    failed = build_dr_grpo_view(grpo, job("failed"), None, "/poll", "/retry")
    assert failed.poll_url is None and failed.retry_url == "/retry"


# -- the overlay ---------------------------------------------------------------------------------

def render(panel) -> BeautifulSoup:
    # an app's templates are the shared ones and its kinds' (app/web/context.py); this module builds no
    # app, so it makes the house's environment itself
    templates = make_templates([k.templates for k in registry().kinds if k.templates])
    html = templates.env.get_template("tiny_lm/lm_path_panel.html").render(path_panel=panel, seed=3)
    return BeautifulSoup(html, "html.parser")


URLS = {p: f"/walkthroughs/tiny_lm_grpo/steps/sample?process={p}#lm-path-panel" for p in PATH_IDS}


@pytest.mark.parametrize("done", [PATH_IDS, ("r1-zero",), ("r1", "distillation")])
def test_the_overlay_draws_every_done_path_and_shows_the_others_progress(done):
    jobs = {p: job("done" if p in done else "running", p, 1.0 if p in done else 0.4) for p in PATH_IDS}
    results = {p: fake_result(p) if p in done else None for p in PATH_IDS}
    overlay = build_overlay(jobs, results, URLS)
    assert [c.key for c in overlay.charts] == [f"lm-overlay-{m}" for m, *_ in OVERLAY_METRICS]
    for chart in overlay.charts:
        assert [s.key for s in chart.series] == [p for p in PATH_IDS if p in done]
        assert [s.style for s in chart.series] == [PATH_IDS.index(p) for p in PATH_IDS if p in done]
    panel = build_path_panel("r1-zero", jobs["r1-zero"], results["r1-zero"], URLS, "/poll?overlay=all", "/retry",
                             overlay=overlay, overlay_url="/overlay", single_url=URLS["r1-zero"])
    assert panel.running == (len(done) < 3)
    soup = render(panel)
    box = soup.select_one("#lm-path-panel")
    assert (box.get("hx-get") == "/poll?overlay=all") == (len(done) < 3)
    for p in PATH_IDS:
        line = soup.select_one(f'#lm-overlay-paths li[data-path="{p}"]')
        assert (line.select_one("progress") is None) == (p in done)
        if p not in done:  # without script, a link reloads the overlay
            assert line.select_one(".path-progress a")["href"] == "/overlay"
        if p in done:
            assert "accuracy 31% → 62%" in line.get_text(" ", strip=True)
        for metric, *_ in OVERLAY_METRICS:
            drawn = soup.select(f'[data-chart="lm-overlay-{metric}"] [data-series="{p}"] polyline')
            assert len(drawn) == (1 if p in done else 0)
    assert soup.select_one("#lm-headline").get_text(strip=True).startswith(f"{len(done)} of 3 paths done")
    assert soup.select_one('.path-choice a[aria-current="true"]').get_text(strip=True) == "All three"


# -- the box -------------------------------------------------------------------------------------

def test_the_box_puts_the_headline_then_the_figure_3_pair_first_and_folds_the_rest():
    grpo, dr = fake_result(), fake_result(end={**GROWN, "mean_length_incorrect": 18.0})
    panel = build_path_panel("r1-zero", job(), grpo, URLS, "/poll", "/retry",
                             dr=build_dr_grpo_view(grpo, job(), dr, "/poll", "/retry"), overlay_url="/overlay")
    assert not panel.running
    soup = render(panel)
    box = soup.select_one("#lm-path-panel")
    assert box.get("hx-get") is None
    assert "harder task than the steps above" in soup.select_one("#lm-path-task").get_text(" ", strip=True)
    order = [el.get("id") or el.get("data-chart") for el in box.select("#lm-headline, #lm-fig3, figure[data-chart]")]
    assert order[:4] == ["lm-headline", "lm-fig3", "lm-fig3-length", "lm-fig3-accuracy"]
    length = soup.select_one('[data-chart="lm-fig3-length"]')
    assert [g["data-series"] for g in length.select("g.series")] == ["mean_length", "mean_length_correct",
                                                                     "mean_length_incorrect"]
    assert soup.select_one('[data-chart="lm-stepwise-by-difficulty"]') is not None
    assert [r.select_one("th").get_text() for r in soup.select("#lm-by-difficulty tbody tr")] == ["2", "3", "4", "5", "6"]
    assert soup.select_one("#lm-by-difficulty tbody tr td").get_text() == "31% → 62%"
    folded = soup.select_one("details#lm-more-curves")
    assert folded is not None and folded.get("open") is None
    assert {f["data-chart"] for f in folded.select("figure")} == {
        "lm-format_rate", "lm-mixed_rate", "lm-recheck_share", "lm-entropy", "lm-kl_to_reference"}
    assert folded.select_one("#lm-path-stages") is not None
    assert "this run agrees" in soup.select_one("#lm-dr-sentence").get_text()
    assert len(soup.select("#lm-showcase .showcase-list li")) == 8
    assert soup.select_one("#lm-overlay-link")["href"] == "/overlay"
    assert soup.select_one(".path-examples .verdict") is not None


def test_a_dr_grpo_run_in_progress_polls_only_its_own_section():
    grpo = fake_result()
    panel = build_path_panel("r1-zero", job(), grpo, URLS, "/poll", "/retry",
                             dr=build_dr_grpo_view(grpo, job("running", fraction=0.4), None, "/poll", "/retry"))
    assert panel.running  # neither cache may keep the box while its second run goes on
    soup = render(panel)
    assert soup.select_one("#lm-path-panel").get("hx-get") is None
    section = soup.select_one("#lm-dr-grpo")
    assert section["hx-get"] == "/poll" and section["hx-select"] == "#lm-dr-grpo"
    assert section.select_one("progress")["value"] == "40"
    assert section.select_one(".path-progress a")["href"] == URLS["r1-zero"]  # without script: reload
    failed = render(build_path_panel("r1-zero", job(), grpo, URLS, "/poll", "/retry",
                                     dr=build_dr_grpo_view(grpo, job("failed"), None, "/poll", "/box?compare=dr_grpo")))
    form = failed.select_one("#lm-dr-grpo form")
    assert failed.select_one("#lm-dr-grpo").get("hx-get") is None and "ValueError: boom" in failed.select_one(
        "#lm-dr-grpo .error").get_text()
    assert form["method"] == "post" and form["action"] == form["hx-post"] == "/box?compare=dr_grpo"


def test_r1s_charts_mark_where_its_stages_start_and_draw_each_style():
    r1 = fake_result("r1")
    soup = render(build_path_panel("r1", job(path="r1"), r1, URLS, "/poll", "/retry", overlay_url="/o"))
    length = soup.select_one('[data-chart="lm-fig3-length"]')
    assert [t.get_text() for t in length.select("text.stage-mark-label")] == ["2", "3, 4", "5"]
    assert len(length.select("line.stage-mark")) == 3
    dashes = [g.select_one("polyline").get("stroke-dasharray") for g in length.select("g.series")]
    assert dashes == [None, "6 4", "2 3"]  # solid, dashed, dotted: not colour alone
    assert [g["class"] for g in length.select("g.series")] == [["series", f"series-{k}"] for k in range(3)]
    assert soup.select_one("#lm-dr-grpo") is None  # the comparison is R1-Zero's only
