"""GRPO against Dr. GRPO on the same R1-Zero run (Liu et al. 2025, "Understanding
R1-Zero-Like Training", arXiv 2503.20783): the length of incorrect and correct answers under both.

What the paper reports: GRPO's per-completion normaliser 1/|o_i| (sample_mean) weighs each token
of a long wrong answer less than a short one's, so wrong answers are pushed down less the longer
they are and grow; Dr. GRPO's constant normaliser (token_sum_norm) and unscaled advantages remove
that bias. The sentence states what this run measured and whether it agrees, from the numbers:
a run that does not agree says so.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.kinds.tiny_lm.engine.lm_paths import PathResult
from app.kinds.tiny_lm.engine.sums_measure import Stats
from app.kinds.tiny_lm.views.length_view import PAIR_SIZE, X_LABEL, along_path, tokens
from app.stores.jobs import JobRecord
from app.views.charts.line_charts import LineChart, line_chart
from app.views.numbers import MINUS

SAME = 1.0  # tokens: two growths closer than this are "no clear difference"
MOSTLY = 0.5  # "not under Dr. GRPO": its growth is under half of GRPO's
PAPER = ("Liu et al. 2025 (Dr. GRPO, arXiv 2503.20783) report that incorrect answers grow longer under GRPO's "
         "per-answer length normalisation and not under Dr. GRPO's constant normaliser")


def _ends(result: PathResult, metric: str) -> tuple[float | None, float | None]:
    points = along_path(result).points
    return getattr(points[0][2].stats, metric), getattr(points[-1][2].stats, metric)


def delta(v: float) -> str:
    return f"{v:.1f}".replace("-", MINUS)


def _wrong(s: Stats) -> int:
    return round(s.completions * (1 - s.accuracy))


def dr_grpo_sentence(grpo: PathResult, dr: PathResult) -> str:
    """Start → end of the incorrect (and correct) answers' mean length under each, the paper's finding,
    and whether this run agrees with it (tested both ways)."""
    g0, g1 = _ends(grpo, "mean_length_incorrect")
    d0, d1 = _ends(dr, "mean_length_incorrect")
    c = {name: _ends(r, "mean_length_correct") for name, r in (("GRPO", grpo), ("Dr. GRPO", dr))}
    n_g, n_d = _wrong(grpo.final.stats), _wrong(dr.final.stats)
    said = (f"Incorrect answers went {tokens(g0)} → {tokens(g1)} tokens under GRPO ({n_g} wrong at the end) and "
            f"{tokens(d0)} → {tokens(d1)} under Dr. GRPO ({n_d} wrong); correct ones "
            + " and ".join(f"{tokens(a)} → {tokens(b)} under {name}" for name, (a, b) in c.items()) + ". ")
    said += PAPER + "; "
    if None in (g0, g1, d0, d1):
        return said + "this run cannot say: one of them sampled no incorrect answer at its start or end."
    assert g0 is not None and g1 is not None and d0 is not None and d1 is not None
    grew_g, grew_d = g1 - g0, d1 - d0
    if grew_g - grew_d >= SAME and grew_g > 0 and grew_d < MOSTLY * grew_g:
        verdict = (f"this run agrees: incorrect answers grew {delta(grew_g)} tokens under GRPO against "
                   f"{delta(grew_d)} under Dr. GRPO.")
    elif grew_g - grew_d >= SAME and grew_g > 0:
        verdict = (f"this run agrees in direction only: incorrect answers grew under both ({delta(grew_g)} tokens "
                   f"under GRPO, {delta(grew_d)} under Dr. GRPO), GRPO's by {delta(grew_g - grew_d)} more, small "
                   f"beside the growth both share.")
    elif grew_d - grew_g >= SAME:
        verdict = (f"this run shows the opposite: incorrect answers changed {delta(grew_g)} tokens under GRPO "
                   f"against {delta(grew_d)} under Dr. GRPO.")
    else:
        verdict = (f"this run shows no clear difference (a change of {delta(grew_g)} tokens under GRPO against "
                   f"{delta(grew_d)} under Dr. GRPO, within {SAME:g} token).")
    return said + verdict


def _words(c: dict) -> str:
    """A run's conventions, as far as the length bias goes."""
    agg = {"sample_mean": "each answer's token mean (1/|o_i|)", "token_mean": "the mean over the group's tokens",
           "token_sum_norm": f"token sums over a constant {c.get('max_length')} tokens"}
    std = "advantages only centred" if c.get("advantage_std") == "none" else "advantages scaled by the group's std"
    return f"{agg.get(c.get('loss_aggregation', ''), c.get('loss_aggregation'))}, {std}, β {c.get('beta'):g}"


def conventions_note(grpo: dict, dr: dict) -> str:
    return f"GRPO here: {_words(grpo)}. Dr. GRPO (preset dr_grpo): {_words(dr)}."


@dataclass(frozen=True)
class DrGrpoView:
    job: JobRecord
    result: PathResult | None
    poll_url: str | None  # while its job is not done: this section polls itself
    retry_url: str | None  # a failed run's "Try again"
    sentence: str = ""
    charts: tuple[LineChart, ...] = ()
    note: str = ""  # the two runs' conventions, from their results

    @property
    def percent(self) -> int:
        return round(100 * self.job.fraction)


def _overlay(key: str, title: str, metric: str, grpo: PathResult, dr: PathResult) -> LineChart:
    w, h = PAIR_SIZE
    spec = [(name, name, [(x, getattr(p.stats, metric)) for x, _s, p in along_path(r).points])
            for name, r in (("GRPO", grpo), ("Dr. GRPO", dr))]
    return line_chart(key, title, "tokens", spec, None, w, h, x_label=X_LABEL, gutter=True, legend=False,
                      caption=f"The same R1-Zero run, seed {grpo.seed}.")


def build_dr_grpo_view(grpo: PathResult, job: JobRecord, dr: PathResult | None, poll_url: str,
                       retry_url: str) -> DrGrpoView:
    if dr is None:
        failed = job.state == "failed"
        return DrGrpoView(job, None, None if failed else poll_url, retry_url if failed else None)
    charts = (_overlay("lm-dr-incorrect", "Length of incorrect answers", "mean_length_incorrect", grpo, dr),
              _overlay("lm-dr-correct", "Length of correct answers", "mean_length_correct", grpo, dr))
    return DrGrpoView(job, dr, None, None, dr_grpo_sentence(grpo, dr), charts,
                      conventions_note(grpo.conventions, dr.conventions))
