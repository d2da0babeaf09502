"""The R1-Zero panel's sentences (app/kinds/smollm/views/run_panel.py), each rule on a synthetic run built to
trigger it and one built not to: the reward's pass means rose, fell or stayed; tied groups named by step;
the clip sentence only when no step clipped; too short a run says it cannot compare passes."""
from __future__ import annotations

import pytest

from app.kinds.smollm.engine.run_params import SmolRunParams
from app.kinds.smollm.engine.run_records import RunAnswer, RunPoint, SmolRunResult
from app.kinds.smollm.views.run_panel import findings, prompt_rows, run_view

NAMES = ("a", "b", "c")


def run(rewards: list[float], *, tied=(), clip: float = 0.0, kls=None) -> SmolRunResult:
    points = tuple(RunPoint(
        step=s, task_name=NAMES[s % 3], reward_mean=r, part_means={"accuracy": r}, tied=s in tied, length_mean=10 + s,
        stopped_share=1.0, kl_mean=(kls or [0.01 * s for s in range(len(rewards))])[s], clip_share=clip, loss=0.0,
        grad_norm=1.0, seconds=1.0, answers=(RunAnswer(f"answer {s}", r, 0.0, 10 + s, True),))
        for s, r in enumerate(rewards))
    return SmolRunResult(SmolRunParams(steps=len(rewards)), "cpu", NAMES, points, seconds=6.0, load_seconds=1.0)


def test_the_reward_sentence_says_which_way_the_pass_mean_went():
    assert findings(run([0, 0, 0.3, 0.5, 0.5, 0.5]))[0] == \
        "Mean reward over one pass of the 3 prompts rose: 0.1 in steps 0–2, 0.5 in steps 3–5."
    assert "fell: 0.5 in steps 0–2, 0.1" in findings(run([0.5, 0.5, 0.5, 0, 0, 0.3]))[0]
    assert "did not move: 0.2" in findings(run([0.2] * 6))[0]
    assert "fewer than two passes" in findings(run([0.1, 0.2, 0.3, 0.4]))[0]


def test_tied_groups_are_named_by_step_and_a_run_without_any_says_so():
    said = findings(run([0.1] * 6, tied=(1, 4)))
    assert "2 of 6 groups tied (every answer the same reward, so every advantage 0): steps 1, 4 moved" in said[3]
    assert findings(run([0.1] * 6))[3] == "No group tied: each of the 6 steps had answers with different rewards."


def test_the_clip_sentence_only_when_nothing_clipped():
    assert any(s.startswith("Clip ratio 0 at every step") for s in findings(run([0.1] * 6)))
    assert not any(s.startswith("Clip ratio 0") for s in findings(run([0.1] * 6, clip=0.02)))


def test_the_kl_sentence_names_the_largest_step_and_the_last():
    said = findings(run([0.1] * 6, kls=[0, 0.02, 0.09, 0.05, 0.04, 0.03]))[2]
    assert "0.03 at the last step, largest 0.09 at step 2" in said


def test_the_charts_and_the_prompt_rows():
    view = run_view(run([0, 0.2, 0.4, 0.6, 0.8, 1.0]))
    assert [c.key for c in view.charts] == ["smol-reward", "smol-length", "smol-kl"]
    reward = view.charts[0]
    assert [s.key for s in reward.series] == ["reward", "pass"]
    assert reward.series[1].points[0] == pytest.approx((2.0, 0.2))  # the mean of steps 0–2
    rows = prompt_rows(view.result)
    assert [(r.name, r.visits, r.first, r.last) for r in rows] == [("a", 2, 0, 0.6), ("b", 2, 0.2, 0.8),
                                                                   ("c", 2, 0.4, 1.0)]
    assert rows[0].first_answer == "answer 0" and rows[0].last_answer == "answer 3"
