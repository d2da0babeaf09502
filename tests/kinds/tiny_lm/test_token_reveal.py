"""Issue 20 in the tiny-LM token view: each step reveals only what it has introduced, marks agree
with numbers (✂ only where the clip binds, the KL term's pull said), ratios print enough digits,
verdicts are the reward rule's own, the update step's sentence is the engine's numbers, and the
form marks what a training path does not read."""
from __future__ import annotations

import re

import pytest

from app.kinds.tiny_lm.domain.arith_task import rewards
from app.kinds.tiny_lm.domain.sums_task import make_sum_prompts, running_steps
from app.kinds.tiny_lm.engine.lm_plans import GRPO_RECIPES, RULES_ALL
from app.kinds.tiny_lm.engine.params import TokenParams
from app.kinds.tiny_lm.engine.step import run_token_step
from app.kinds.tiny_lm.views.lm_path_panel import FINAL_RULE, example_rows
from app.kinds.tiny_lm.views.token_form import PATH_FIELDS, TokenForm
from app.kinds.tiny_lm.views.token_steps import STEP_METRIC, STEPS, build_token_panel, shown_at, verdict
from app.kinds.tiny_lm.views.update_view import build_update_view, signed
from app.views import numbers
from app.views.numbers import readout

M = numbers.MINUS


@pytest.fixture(scope="module")
def result():
    return run_token_step(TokenParams())


# -- reveal, don't repeat ------------------------------------------------------------------

def test_each_step_adds_to_the_last_and_shows_its_own_metric():
    seen: frozenset[str] = frozenset()
    for step in STEPS:
        now = shown_at(step)
        assert now is not None and seen < now, step
        assert STEP_METRIC[step] in now - seen, step  # the strip is what the step introduces
        seen = now


@pytest.mark.parametrize("step", STEPS)
def test_cards_say_only_what_the_step_has_introduced(result, step):
    panel = build_token_panel(result, step)
    keys = {k for row in panel.rows for cell in row.cells for k, _ in cell.card}
    labels = " ".join(cell.label for row in panel.rows for cell in row.cells)
    before = STEPS.index(step)
    assert ("ρ" in keys) == (before >= STEPS.index("ratio"))
    assert ("clip" in keys) == (before >= STEPS.index("ratio"))
    assert ("KL" in keys) == (before >= STEPS.index("kl"))
    assert ("∂loss/∂log π" in keys) == (before >= STEPS.index("aggregation"))
    assert ("Δ log π after the step" in keys) == (step == "update")
    if before < STEPS.index("ratio"):
        assert "✂" not in labels and not any(c.clipped for row in panel.rows for c in row.cells)
    # the strips on offer are those introduced, the verdict only once rewards are
    assert {m.id for m in panel.metrics} == shown_at(step)
    assert all(bool(row.verdict) == (before >= STEPS.index("rewards")) for row in panel.rows)


def test_steps_one_and_two_show_different_strips(result):
    sample, rewards_ = build_token_panel(result, "sample"), build_token_panel(result, "rewards")
    assert sample.metric.id == "logp_old" and rewards_.metric.id == "reward"
    assert [c.shown for c in sample.rows[0].cells] != [c.shown for c in rewards_.rows[0].cells]
    assert all(c.value == rewards_.rows[i].record.reward for i in range(len(rewards_.rows))
               for c in rewards_.rows[i].cells)


# -- marks agree with numbers ---------------------------------------------------------------

def test_clip_marks_are_the_binding_clips_and_the_kl_pull_is_said(result):
    panel = build_token_panel(result, "kl")
    pulled = 0
    for i, row in enumerate(panel.rows):
        for k, (cell, token) in enumerate(zip(row.cells, row.record.tokens, strict=True)):
            assert cell.clipped == token.clip_active
            pull = result.grad_kl[i][k]
            if token.clip_active and pull != 0:
                pulled += 1
                assert cell.kl_pull
                said = f"clip binds ✂: no push from the surrogate; the KL term still pulls: {readout(pull)}"
                assert said in cell.label
                assert ("clip", said.removeprefix("clip ")) in cell.card
            else:
                assert not cell.kl_pull
                assert "still pulls" not in cell.label
    assert pulled == panel.kl_pull_count > 0


def test_without_a_kl_term_a_clipped_token_does_not_claim_a_pull():
    res = run_token_step(TokenParams(beta=0.0))
    panel = build_token_panel(res, "kl")
    assert any(t.clip_active for c in res.completions for t in c.tokens)
    assert panel.kl_pull_count == 0
    assert not any("still pulls" in cell.label for row in panel.rows for cell in row.cells)


def test_the_gradient_line_splits_surrogate_and_kl(result):
    panel = build_token_panel(result, "aggregation")
    cell, token = panel.rows[0].cells[0], result.completions[0].tokens[0]
    kl = result.grad_kl[0][0]
    assert ("∂loss/∂log π", f"{readout(token.grad)} (surrogate {readout(token.grad - kl)}, KL {readout(kl)})") \
        in cell.card


@pytest.mark.parametrize("value, bounds, text", [
    (1.0, (), "1"), (1.2004, (), "1.2004"), (1.2, (), "1.2000"), (1.201593445525175, (), "1.2016"),
    (0.7353486967266104, (), "0.7353"), (0.999991, (), "1.0000"), (0.5, (), "0.5000"),
    (1.20000003, (), "1.2000"), (1.20000003, (0.8, 1.2), "1.20000003"), (1.19999999, (0.8, 1.2), "1.19999999"),
    (0.79999, (0.8, 1.2), "0.79999"), (0.79999, (), "0.8000"), (1.2, (0.8, 1.2), "1.2000"),
    (5e-5, (), f"5e{M}5"), (1e7, (), "1e7"), (float("inf"), (), "∞"),
])
def test_ratio_spelling_tells_a_ratio_from_its_bound(value, bounds, text):
    assert numbers.ratio(value, bounds) == text


@pytest.mark.parametrize("bound", [0.8, 1.2, 1.28, 3.0])
@pytest.mark.parametrize("offset", [4e-4, -4e-4, 4e-5, -3e-8, 3e-8])
def test_a_ratio_off_its_bound_never_prints_as_the_bound(bound, offset):
    shown = numbers.ratio(bound + offset, (0.8, 1.2, 1.28, 3.0))
    assert float(shown.replace(M, "-")) != bound, shown


def test_the_ratio_strip_uses_the_ratio_spelling_beside_the_clip_bounds(result):
    panel = build_token_panel(result, "ratio")
    bounds = (1 - result.params.clip_epsilon, 1 + result.params.clip_epsilon_high)
    for row in panel.rows:
        for cell, token in zip(row.cells, row.record.tokens, strict=True):
            assert cell.shown == numbers.ratio(token.ratio, bounds)
            assert ("ρ", numbers.ratio(token.ratio, bounds)) in cell.card


# -- verdicts are the reward rule's ------------------------------------------------------------

def _paid(text: str) -> dict[str, float]:
    return {k: float(v.replace(M, "-")) for k, v in re.findall(r"(accuracy|format|language) (\S+)", text)}


@pytest.mark.parametrize("parts", ["accuracy+format", "accuracy+format+language"])
@pytest.mark.parametrize("seed", [0, 3, 5])
def test_verdicts_add_up_to_the_reward_under_the_rule_in_force(parts, seed):
    res = run_token_step(TokenParams(seed=seed, reward_parts=parts))
    panel = build_token_panel(res, "rewards")
    for row in panel.rows:
        paid = _paid(row.verdict)
        assert set(paid) == {"accuracy", "format", "language"}
        counted = sum(v for k, v in paid.items() if k in res.reward_parts)
        assert counted == pytest.approx(row.record.reward), row.verdict
        assert ("(not counted)" in row.verdict) == ("language" not in res.reward_parts)
        # "wrong" is said of an answer only, never of a completion the rule paid something
        assert not row.verdict.startswith("wrong,")


def test_a_right_sum_outside_the_template_is_called_right_and_paid_nothing():
    v = verdict(24, "24<end>", 0.0, 0.0, 1.0, ("accuracy", "format"))
    assert v.startswith("right sum (24) outside <answer>: accuracy 0")
    assert "format 0" in v and "language 1 (not counted)" in v
    assert "no <end>: format 0" in verdict(24, "<think>5+9=14</think><answer>24</answer>", 1.0, 0.0, 1.0,
                                          ("accuracy", "format"))
    assert verdict(24, "<think>5+9=14</think><answer>25</answer><end>", 0.0, 1.0, 1.0, RULES_ALL) \
        .startswith("wrong answer (25): accuracy 0 · template kept: format 1")


@pytest.mark.parametrize("path", list(FINAL_RULE))
def test_path_examples_are_judged_by_the_paths_own_rule(path):
    """The paths run on the running-sums task (issue 22): its prompts, in both scripts, and its habits."""
    prompts = make_sum_prompts(10, 1)[::2][:4]  # sizes 2, 4, 6, 3 in both scripts
    first = prompts[0]
    steps = " ".join(f"{a}+{b}={c}" for a, b, c in running_steps(first.operands))
    texts = ("24<end>", f"<think>{steps}</think><answer>{first.answer}</answer><end>", "<think>x</think>",
             "<answer>7</answer><end>")
    rows = example_rows(path, tuple((p.text, t) for p, t in zip(prompts, texts, strict=True)))
    assert {p.script for p in prompts} == {"digits", "letters"} and len({p.difficulty for p in prompts}) == 4
    assert [r.prompt for r in rows] == [p.text for p in prompts] and all(r.verdict for r in rows)
    rule = FINAL_RULE[path][1]
    assert rule == {"r1-zero": GRPO_RECIPES["rl"].reward, "r1": GRPO_RECIPES["final_rl"].reward,
                    "distillation": RULES_ALL}[path]
    for row, p, t in zip(rows, prompts, texts, strict=True):
        parts = rewards(p, t)
        assert row.reward == parts.total(rule)
        paid = _paid(row.verdict)
        assert sum(v for k, v in paid.items() if k in rule) == pytest.approx(row.reward)


# -- the update step ---------------------------------------------------------------------------

def test_the_update_sentence_is_the_engines_numbers(result):
    view = build_update_view(result)
    assert view is not None and view.focus is not None
    c, p = result.completions[view.focus], result.update_parts[view.focus]
    assert c.advantage < 0 < p.all_terms
    for v in (p.all_terms, p.momentum_only, p.own, p.others, p.own - p.own_surrogate,
              p.own + p.others - p.momentum_only):
        assert signed(v) in view.sentence, (v, view.sentence)
    assert f"#{view.focus} has A = {readout(c.advantage)}" in view.sentence
    # every other negative-advantage completion that rose is named, with its own numbers
    for i, (ci, pi) in enumerate(zip(result.completions, result.update_parts, strict=True)):
        if i != view.focus and ci.advantage < 0 < pi.all_terms:
            assert f"#{i} ({signed(pi.all_terms)}: own terms alone {signed(pi.own)}, the others' " \
                   f"{signed(pi.others)})" in view.sentence
    # the rows are the engine's, one per completion
    assert [r.part for r in view.rows] == list(result.update_parts)
    assert all(r.direction == ("more likely ↑" if r.part.all_terms > 0 else "less likely ↓") for r in view.rows)


def test_an_update_with_no_riser_says_so():
    res = run_token_step(TokenParams(inner_steps=0))
    view = build_update_view(res)
    assert view is not None
    risers = [i for i, (c, p) in enumerate(zip(res.completions, res.update_parts, strict=True))
              if c.advantage < 0 and p.all_terms > 0]
    assert (view.focus is None) == (not risers)
    if not risers:
        assert view.sentence.startswith("Every completion with a negative advantage becomes less likely")


# -- the form beside a training path -----------------------------------------------------------

def test_the_form_marks_what_a_path_does_not_read():
    form = TokenForm.from_params(TokenParams())
    assert form.for_path(None) is form and not form.not_for_path
    marked = form.for_path("R1-Zero: GRPO from the base")
    assert set(marked.not_for_path) == {s.name for s in form.specs} - set(PATH_FIELDS)
    assert "seed" not in marked.not_for_path
    assert all(reason.startswith("Not used by the R1-Zero path") for reason in marked.not_for_path.values())
    assert marked.values == form.values  # the step's own values stay
