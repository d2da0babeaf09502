"""The view models behind issue 49's items 2 to 4, without a browser (the browser's proof is
test_second_look_browser.py): the probability bars put a row's numbers under its label where both
would not share a line; a training path's view says what it shows, whether the step's point holds in
it and why not; the export's palette-default shape is a neutral note in the inspector, not a warning."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from paths import PROCESSES_PATH, SEED_PATH

from app.domain.snapshot import load_snapshot
from app.kinds.toy.domain.process_spec import load_processes
from app.kinds.toy.views.charts.probabilities import probability_bars
from app.kinds.toy.views.path_view import CANNOT, build_path_view
from app.views.inspector import build_inspector, shape_note, shape_warning
from app.views.meaning import node_meaning

CATALOG = load_processes(PROCESSES_PATH)
LABELS = ["0 · right but unformatted", "1 · wrong", "2 · readable correct", "3 · mixed-language correct"]
ROW = [math.log(p) for p in (0.0637, 0.108, 0.723, 0.105)]


def test_probability_rows_put_their_numbers_under_the_label_where_both_would_not_fit():
    narrow = probability_bars(ROW, correct=2, labels=LABELS, width=330)   # the story's phone-wide figure
    assert narrow.stacked
    for bar in narrow.bars:
        # the numbers start under the label, a line lower, and the bar under both
        assert (bar.value_x, bar.value_anchor) == (bar.x, "start")
        assert bar.value_y - bar.text_y >= 14 and bar.y >= bar.value_y + 4
    wide = probability_bars(ROW, correct=2, labels=LABELS, width=380)     # the inspector's: one line
    assert not wide.stacked
    for bar in wide.bars:
        assert (bar.value_x, bar.value_y, bar.value_anchor) == (wide.value_x, bar.text_y, "end")
    assert narrow.height > wide.height


def result(rewards, clipped=(), kind="grpo", prompt=0, iteration=39):
    samples = [{"reward": r, "clip_active": i in clipped} for i, r in enumerate(rewards)]
    return SimpleNamespace(samples=samples, kind=kind, params=SimpleNamespace(prompt=prompt, iteration=iteration))


def test_a_paths_view_says_what_it_shows_and_why_the_point_cannot_show():
    zero = CATALOG.get("r1-zero")
    rl = zero.stage("rl")
    tied = build_path_view(result([1.5] * 16), "reference", zero, rl, 40, "/back")
    assert tied.title == "DeepSeek-R1-Zero's last update, training step 40 of 40"
    assert tied.where == "stage 1 of 1, “GRPO with rule rewards”; prompt 0, a group of 16 answers"
    assert tied.point == ("All 16 answers in this group earned the full reward (1.5): by its last update the policy "
                          f"has learned this prompt, so every advantage is 0 and nothing is clipped: {CANNOT}.")
    assert not tied.holds and tied.back_url == "/back"
    # a tie below the full reward says only that
    low = build_path_view(result([0.5] * 4), "advantages", zero, rl, 40, "/back")
    assert low.point == f"Every answer in this group earned the same reward (0.5), so every advantage is 0: {CANNOT}."
    # a group that disagrees, but nothing clipped: the clip's steps say so, the others hold
    unclipped = result([2.0, 1.5, 2.0])
    assert "No answer is clipped" in build_path_view(unclipped, "clip", zero, rl, 40, "/b").point
    assert not build_path_view(unclipped, "reference", zero, rl, 40, "/b").holds
    assert build_path_view(unclipped, "advantages", zero, rl, 40, "/b").holds
    clipped = build_path_view(result([2.0, 1.5, 2.0], clipped=(1,)), "reference", zero, rl, 40, "/b")
    assert clipped.holds and "1 of the 3 answers are clipped" in clipped.point
    # the policy step's point (probabilities, a group sampled from them) holds even in a tied group
    assert build_path_view(result([1.5] * 16), "policy", zero, rl, 40, "/b").holds


@pytest.mark.parametrize("stage_id, kind, words", [
    ("cold-start", "sft", "fine-tunes on examples"),
    ("rejection-sampling", "rejection_sampling", "only samples answers"),
])
def test_a_stage_that_is_not_grpo_says_the_point_cannot_show(stage_id, kind, words):
    r1 = CATALOG.get("r1")
    view = build_path_view(result([], kind=kind, iteration=2), "clip", r1, r1.stage(stage_id), 30, "/b")
    assert words in view.point and view.point.endswith(f"{CANNOT}.") and not view.holds
    assert view.where.startswith(f"stage {[s.id for s in r1.stages].index(stage_id) + 1} of 5")
    if kind == "sft":
        assert view.title == "DeepSeek-R1's last update, training step 30 of 30"


def test_the_palette_default_shape_is_a_note_not_a_warning():
    defaults = ["1,3,224,224"]
    assert shape_warning("1,3,224,224", (1, 3), defaults, is_input=True) is None
    assert shape_note("1,3,224,224", (1, 3), defaults, is_input=True) == \
        "The file's palette entry declares a default shape 1,3,224,224; the traced input is 1,3."
    assert shape_note("1,3,224,224", (1, 3, 224, 224), defaults, is_input=True) is None   # it agrees: nothing to say
    # the real model's input: the file keeps the shape its export traced; a run feeds its own
    assert shape_warning("2,7", (8, 40), defaults, is_input=True) is None
    assert shape_note("2,7", (8, 40), defaults, is_input=True) == \
        "The file declares shape 2,7, the input it was exported with; the traced input is 8,40."
    # any other node the file gives a shape the model does not compute is still a warning, and no note
    assert shape_warning("1,5", (1, 3), defaults) == "The file declares shape (1,5); the traced tensor is (1, 3). Shown as traced."
    assert shape_note("1,5", (1, 3), defaults) is None
    seed = load_snapshot(SEED_PATH)
    record = SimpleNamespace(shape=(1, 3), values=[[0.0, 1.0, 2.0]], grad=None)
    view = build_inspector(seed, "input", node_meaning(seed, "input"), record)
    assert view.shape_warning is None
    assert view.shape_note == "The file's palette entry declares a default shape 1,3,224,224; the traced input is 1,3."
