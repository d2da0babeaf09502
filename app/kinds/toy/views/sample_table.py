"""The group table of a GRPO step: one row per completion, one column per term of the loss.

Which columns show depends on the conventions in force (app/engine/params.py): a column
that would repeat another, or hold only "no", is left out, so the paper's defaults keep the
ten columns they always had. Flags are words with a symbol, never colour alone.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.engine.grpo.params import Conventions
from app.kinds.toy.engine.records import StepResult
from app.kinds.toy.views.figure_control import shown_update_words
from app.kinds.toy.views.meaning import choice_label
from app.views import convention_text as ct
from app.views.numbers import param, readout

MAX_ROWS = 64  # the JSON API has them all

STD_SHORT = {"population": "÷ population std", "sample": "÷ sample std", "none": "no ÷ std"}


@dataclass(frozen=True)
class Column:
    key: str  # the sample's field, or "clip" / "clamps" for flags
    header: str
    sub: str = ""  # a smaller second line: which std, which estimator, where the KL goes


@dataclass(frozen=True)
class Cell:
    value: float | None = None  # a number, drawn by the num() macro
    text: str = ""  # words after (or instead of) the number
    mark: str = ""  # the class of those words: clip-mark, saturated, clamp-mark
    fmt: str = "num"  # how the number reads: "num" (4 significant digits) or "ratio" (1.2004, not 1.2)


@dataclass(frozen=True)
class Row:
    index: int
    action: int
    choice: str  # "2 · readable correct"
    choice_note: str  # where the label and the reward seem to disagree, why they do not ("" otherwise)
    clip_active: bool
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class SampleTable:
    columns: tuple[Column, ...]  # after the row number and the choice
    rows: tuple[Row, ...]
    total: int  # completions in the group (rows shows at most MAX_ROWS)
    caption: str
    conventions: str  # "Conventions: TRL 1.16 defaults (β overridden to 0.04)."
    in_force: str  # every convention, one line (with the one-token aggregation remark)
    # the keys of the columns a phone shows only one tap away (the earlier steps' columns; the
    # step's own stay): "" for a table that shows every column at every width
    folded: frozenset[str] = frozenset()


def columns(c: Conventions) -> tuple[Column, ...]:
    reward_kl = c.kl_placement == "reward"
    bias = c.kl_bias_correction
    kl_bound = ct.kl_clamps(c)[1]
    cols = [Column("reward", "reward r")]
    if reward_kl:
        cols.append(Column("reward_used", "reward used", f"r − β·D, β = {param(c.beta)}"))
    cols += [Column("advantage", "advantage A", STD_SHORT[c.advantage_std]),
             Column("ratio", "ratio ρ", f"log-ratio clamp ±{param(c.log_ratio_clamp)}"
                    if c.log_ratio_clamp is not None else ""),
             Column("clipped", "clipped L", f"floor {param(c.dual_clip)}·A if A < 0"
                    if c.dual_clip is not None else ""),
             Column("divergence", "divergence D", c.kl_estimator + (" of π_old, in the reward" if reward_kl else "")
                    + (f", clamp ±{param(kl_bound)}" if kl_bound is not None else ""))]
    if bias:
        cols += [Column("kl_rho_factor", "ρ factor", "KL × ρ (TRL)"),
                 Column("kl_used", "KL used", f"ρ·D, × β = {param(c.beta)}")]
    objective = "objective L" if reward_kl else ("objective L−βρD" if bias else "objective L−βD")
    cols.append(Column("objective", objective))
    if c.loss_aggregation != "sample_mean":
        cols.append(Column("weight", "weight w", c.loss_aggregation))
    cols.append(Column("ratio_grad", "∂loss/∂ρ"))
    cols.append(Column("clip", "clip / dual clip" if c.dual_clip is not None else "clip"))
    if c.log_ratio_clamp is not None or kl_bound is not None:
        cols.append(Column("clamps", "clamps"))
    return tuple(cols)


# When each column enters the toy's story (app/kinds/toy/views/story.py): the rewards and the
# advantages at `advantages`, the ratio and the clip at `clip`, the KL term and the whole
# objective at `reference`. A step outside the story (or none) shows every column.
STAGES = ("policy", "advantages", "clip", "reference")
COLUMN_STAGE = {"reward": "advantages", "advantage": "advantages",
                "ratio": "clip", "clipped": "clip", "ratio_grad": "clip", "clip": "clip", "clamps": "clip"}
# What a phone shows of the story's table on a step whose table is wider than its column: the
# columns its point is proven by (story.py's evidence) and, on the reference step, the L that its
# point compares the objective with; a clipped row is marked on the row itself, so the clip flag
# column is one tap away with the rest (macros/samples.html).
PHONE_COLUMNS = {"clip": frozenset({"ratio", "clipped", "ratio_grad"}),
                 "reference": frozenset({"clipped", "divergence", "objective"})}


def revealed(cols: tuple[Column, ...], upto: str | None) -> tuple[Column, ...]:
    if upto not in STAGES:
        return cols
    stage = STAGES.index(upto)
    return tuple(c for c in cols if STAGES.index(COLUMN_STAGE.get(c.key, "reference")) <= stage)


def _clamps(sample: dict) -> str:
    hits = [word for key, word in (("ratio_clamped", "ρ"), ("kl_log_ratio_clamped", "KL Δ"), ("kl_clamped", "KL"))
            if sample.get(key)]
    return "⇥ " + ", ".join(hits) + " clamped" if hits else ""


def _cell(key: str, sample: dict) -> Cell:
    if key == "clip":
        if sample.get("dual_clip_hit"):
            return Cell(text="⌊ dual clip (c·A)", mark="clip-mark")
        return Cell(text="✂ clipped", mark="clip-mark") if sample.get("clip_active") else Cell(text="—")
    if key == "clamps":
        text = _clamps(sample)
        return Cell(text=text, mark="clamp-mark") if text else Cell(text="—")
    if key == "ratio_grad":
        grad = sample.get(key)
        if not (sample.get("clip_active") or sample.get("dual_clip_hit")):
            return Cell(grad)
        if grad == 0:
            return Cell(grad, "(saturated)", "saturated")
        return Cell(grad, "(KL × ρ only)", "saturated")  # the clip is flat; the KL term's ρ still pulls
    value = sample.get(key)
    if key == "ratio" and isinstance(value, float):
        return Cell(value, fmt="ratio")
    return Cell(value if isinstance(value, (int, float)) and not isinstance(value, bool) else None,
                "" if value is not None else "n/a")


def caption(c: Conventions) -> str:
    if c.policy_loss == "cispo":
        return (f"Per-completion CISPO terms. Rows marked “clipped” have their ratio capped at "
                f"{param(c.clip_epsilon_high)} with A > 0; the capped ratio is a constant weight, so every "
                "row still pushes its log-probability and ∂loss/∂ρ is 0 except through KL × ρ. Point at or focus "
                "a row to find its sample in the charts and formulas.")
    flat = ("∂loss/∂ρ is exactly 0" if not (c.kl_bias_correction and c.beta) else
            "the surrogate is flat in ρ, and only the KL × ρ term's gradient is left")
    dual = " (or, marked “dual clip”, the floor c·A)" if c.dual_clip is not None else ""
    return (f"Per-completion GRPO terms. Rows marked “clipped”{dual} have an active clip: {flat}. "
            "Point at or focus a row to find its sample in the charts and formulas.")


RIGHT_ANSWER = ("correct", "mixed")  # roles whose final answer is right (app/kinds/toy/domain/toy_task.py)


def choice_note(role: str, reward: float, rewards: list[float]) -> str:
    """Why a label and its reward can read as a contradiction: a right answer the rule does not
    pay as much as another answer, or a wrong one it still pays for its format."""
    top = max(rewards)
    if role in RIGHT_ANSWER and reward < top:
        return f"right answer, but this rule pays it {readout(reward)}, not {readout(top)}"
    if role not in RIGHT_ANSWER and reward > min(rewards):
        return f"no right answer, yet this rule pays it {readout(reward)}"
    return ""


def build_sample_table(result: StepResult | None, upto: str | None = None) -> SampleTable | None:
    """The table of a GRPO step (a walkthrough step or a path's GRPO stage); None otherwise.
    `upto`: a toy step id; only the columns the story has introduced by then show."""
    if result is None or result.kind != "grpo":
        return None
    c = result.conventions
    cols = revealed(columns(c), upto)
    rewards = [float(s["reward"]) for s in result.samples] or [0.0]
    keys = {col.key for col in cols}
    has_clip = "clip" in keys
    rows = tuple(
        Row(i, s["action"], choice_label(result.prompt, s["action"]) if isinstance(s.get("action"), int) else "?",
            choice_note(result.prompt.role(s["action"]), float(s["reward"]), rewards)
            if isinstance(s.get("action"), int) and (upto is None or "reward" in keys) else "",
            bool(s.get("clip_active")) and has_clip,
            tuple(_cell(col.key, s) for col in cols))
        for i, s in enumerate(result.samples[:MAX_ROWS]))
    text = caption(c) if has_clip else ("One row per answer of the group. Point at or focus a row to find it "
                                         "in the chart.")
    folded = frozenset(k for k in keys if upto in PHONE_COLUMNS and k not in PHONE_COLUMNS[upto])
    line = " ".join(p for p in (ct.conventions_line(result.params), shown_update_words(result.params)) if p)
    return SampleTable(cols, rows, len(result.samples), text, line,
                       ct.in_force(c, len(result.samples)), folded)
