"""Two recorded steps of a run side by side (issue 34): the page's view model (which steps the URL asks for:
views/run_diff_query.py; its JSON twin's body: views/run_diff_json.py). The numbers come finished from
engine/run_diff.py; this file words and formats them.

Every section opens with one sentence a student can read: what the number is, and which way is "more
off-policy", "more certain" or "more tied".
"""
from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from app.runs.domain.two_sample import TwoSamples
from app.runs.engine.run_diff import MIN_TOKEN_COUNT, QUANTITIES, PromptChange, RunDiff, TokenChange
from app.runs.views import urls
from app.runs.views.run_diff_chart import DiffHistogram, diff_histogram
from app.runs.views.run_diff_query import CompareForm, compare_form
from app.views.numbers import MINUS, significant
from app.views.tokens.metrics import visible
from app.views.urls import URLS

TOP = 8  # rows of each "what changed most" table
PROMPT_CHARS = 90  # a prompt's text in a table cell, cut with …

TITLES = {"ratio": "Policy ratio ρ", "kl": "KL to the reference", "entropy": "Entropy",
          "advantage": "Advantage", "length": "Completion length", "reward": "Reward"}
SENTENCES = {
    "ratio": "ρ = π_θ/π_old for each trained token, as the loss computed it: 1 means the policy being trained "
             "still agrees with the one that sampled the tokens; the further from 1 (either way), the more "
             "off-policy the step, and past 1 ± ε the clip stops the push.",
    "kl": "The per-token estimate of how far π_θ has moved from the frozen reference model (the record's own "
          "estimator, the one the loss's β·KL term used): 0 where they agree; larger is further from where "
          "training started.",
    "entropy": "How spread the policy's next-token distribution was at each trained token, in nats, as the "
               "trainer recorded it: lower means the model is more certain and explores less; near 0 it "
               "always writes the same thing.",
    "advantage": "Each completion's advantage, its reward measured against its group's: positive completions are "
                 "pushed up, negative down; a tied group gives 0 to all its completions, so a pile at 0 means "
                 "little to learn from.",
    "length": "Each completion's length in trained tokens (loss mask 1), as TRL's completions/mean_length counts "
              "them; a length stuck at the maximum means completions are being cut off.",
    "reward": "Each completion's reward, the reward functions' weighted sum (unscored completions left out): "
              "the thing GRPO is trying to raise.",
}
ROWS = (("count", "count"), ("mean", "mean"), ("p5", "p5"), ("p50", "median (p50)"), ("p95", "p95"),
        ("min", "min"), ("max", "max"))


# -- the page ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Side:
    step: int
    explorer_url: str  # the explorer with this step selected
    walkthrough_url: str  # the record as its own walkthrough


@dataclass(frozen=True)
class StatRow:
    label: str
    a: str
    b: str
    change: str  # b − a


@dataclass(frozen=True)
class QuantityView:
    name: str
    slug: str  # for ids: run-diff-<slug>
    title: str
    per: str  # "per trained token" / "per completion"
    sentence: str
    rows: tuple[StatRow, ...]
    shift: str  # the shift of the mean and median, and the KS distance, in words ("" when one side is missing)
    missing: str  # "" or which step did not record it
    chart: DiffHistogram | None
    note: str  # "" or what a reader must know to read it (left-out values, one value everywhere)


@dataclass(frozen=True)
class PromptRow:
    prompt: str  # cut to PROMPT_CHARS
    full: str  # the whole prompt (its tooltip)
    a: str
    b: str
    change: str


@dataclass(frozen=True)
class PromptTable:
    slug: str
    title: str
    sentence: str
    rows: tuple[PromptRow, ...]
    shown: str  # "all 3" / "the 8 of 40 that changed most"


@dataclass(frozen=True)
class TokenRow:
    text: str  # the token as it reads on screen (visible(): · for a space, ↵ for a newline)
    token_id: int
    counts: str  # "12 → 30 times"
    a: str
    b: str
    change: str


@dataclass(frozen=True)
class RunDiffPage:
    run_id: str
    title: str
    a: Side
    b: Side
    run_url: str
    api_url: str
    quantities: tuple[QuantityView, ...]
    prompts_line: str
    prompt_tables: tuple[PromptTable, ...]
    tokens_line: str
    rises: tuple[TokenRow, ...]
    falls: tuple[TokenRow, ...]
    form: CompareForm | None


def signed(v: float, sig: int = 3) -> str:
    if math.isnan(v):
        return "—"
    if v == 0:
        return "0"
    return ("+" if v > 0 else "") + significant(v, sig)


def _cell(v: float, count: bool = False) -> str:
    if math.isnan(v):
        return "—"
    if count or (v == int(v) and abs(v) < 1e12):
        return f"{int(v):,}"
    return significant(v, 4)


def _side(run_id: str, step: int, recorded: Mapping[int, str]) -> Side:
    return Side(step, urls.run(run_id, {"step": step}) + "#selected-step", URLS.walkthrough(recorded[step]))


def _stat_rows(s: TwoSamples) -> tuple[StatRow, ...]:
    out = []
    for key, label in ROWS:
        va = float(getattr(s.a, key)) if s.a is not None else math.nan
        vb = float(getattr(s.b, key)) if s.b is not None else math.nan
        change = signed(vb - va, 3) if key != "count" and not (math.isnan(va) or math.isnan(vb)) else ""
        out.append(StatRow(label, _cell(va, key == "count"), _cell(vb, key == "count"), change))
    return tuple(out)


def _ks_words(ks: float) -> str:
    if ks == 0:
        return "the same distribution"
    if ks < 0.1:
        return "nearly the same distribution"
    if ks < 0.3:
        return "a visible change of shape"
    if ks < 0.7:
        return "a large change"
    return "hardly any overlap" if ks < 1 else "no overlap at all: every value of one step lies beyond every value "\
                                               "of the other"


def _quantity(name: str, per: str, s: TwoSamples, d: RunDiff) -> QuantityView:
    missing = [str(step) for step, side in ((d.a, s.a), (d.b, s.b)) if side is None]
    missing_words = ""
    if missing:
        what = "scored" if name == "reward" else "recorded"
        missing_words = f"Not {what} at step {' or '.join(missing)}, so there is nothing to compare."
    shift, chart, notes = "", None, []
    if s.mean_shift is not None and s.median_shift is not None and s.ks is not None and s.histogram is not None:
        shift = (f"From step {d.a} to step {d.b} the mean moved {signed(s.mean_shift)} and the median "
                 f"{signed(s.median_shift)}; the KS distance (the largest gap between the two steps' cumulative "
                 f"shares, 0 to 1) is {significant(s.ks, 3)}: {_ks_words(s.ks)}.")
        chart = diff_histogram(TITLES[name], d.a, d.b, s.histogram)
    if s.a is not None and s.b is not None and s.a.min == s.a.max == s.b.min == s.b.max:
        notes.append(f"Every value at both steps is {significant(s.a.min, 4, strip=True)}"
                     + (": one update per batch (TRL's num_iterations = 1), so π_old is π_θ and the step is exactly "
                        "on-policy." if name == "ratio" and s.a.min == 1 else "."))
    dropped = d.left_out.get(name, (0, 0))
    if any(dropped):
        notes.append(f"Left out as not finite: {dropped[0]} at step {d.a}, {dropped[1]} at step {d.b}.")
    return QuantityView(name, name, TITLES[name], f"per {per}", SENTENCES[name], _stat_rows(s), shift,
                        missing_words, chart, " ".join(notes))


PROMPT_TABLES = (
    ("reward", "Mean reward", "The mean reward of each shared prompt's completions: a rise means the policy now "
                              "answers that prompt better."),
    ("length", "Mean length (tokens)", "How long the completions of each shared prompt were, in trained tokens."),
    ("tied", "Share tied", "The share of the prompt's completions in a tied group (every reward equal, so GRPO "
                           "gives them all advantage 0): 100% means the prompt taught nothing at that step."),
)


def _prompt_cell(v: float, share: bool) -> str:
    if math.isnan(v):
        return "—"
    return f"{v * 100:.0f}%" if share else significant(v, 3)


def _prompt_change(v: float, share: bool) -> str:
    if math.isnan(v):
        return "—"
    if share:
        return "0" if round(v * 100) == 0 else f"{'+' if v > 0 else MINUS}{abs(v) * 100:.0f} pts"
    return signed(v)


def _prompt_row(r: PromptChange, share: bool) -> PromptRow:
    one_line = " ".join(r.prompt.split())
    cut = one_line if len(one_line) <= PROMPT_CHARS else one_line[:PROMPT_CHARS - 1] + "…"
    return PromptRow(cut, r.prompt[:2000], _prompt_cell(r.a, share), _prompt_cell(r.b, share),
                     _prompt_change(r.change, share))


def _shown(n: int) -> str:
    return f"all {n}" if n <= TOP else f"the {TOP} of {n} that changed most"


def escaped(text: str) -> str:
    """A token's text with nothing invisible: whitespace as visible() draws it, other control and format
    characters as \\x.. / \\u.... (the page's HTML escaping is the template's)."""
    out = []
    for ch in visible(text):
        cat = unicodedata.category(ch)
        out.append(ch if cat[0] != "C" else (f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}"))
    return "".join(out)


def _token_row(t: TokenChange) -> TokenRow:
    return TokenRow(escaped(t.text), t.token_id, f"{t.count_a} → {t.count_b} times", significant(t.mean_a, 3),
                    significant(t.mean_b, 3), signed(t.change))


def run_diff_page(run_id: str, d: RunDiff, recorded: Mapping[int, str]) -> RunDiffPage:
    quantities = tuple(_quantity(name, per, d.quantities[name], d) for name, per in QUANTITIES)
    p = d.prompts
    if p.matched:
        prompts_line = (f"{p.matched} prompt{'s appear' if p.matched > 1 else ' appears'} at both steps (matched "
                        f"by their text); {p.only_a} only at step {d.a}, {p.only_b} only at step {d.b}.")
    else:
        prompts_line = (f"Steps {d.a} and {d.b} have no prompt in common ({p.only_a} prompts at step {d.a}, "
                        f"{p.only_b} at step {d.b}, none the same text), so no prompt can be compared with itself: "
                        "the distributions above compare the two batches as wholes.")
    tables = tuple(PromptTable(key, title, sentence, tuple(_prompt_row(r, key == "tied") for r in rows[:TOP]),
                               _shown(len(rows)))
                   for (key, title, sentence), rows in zip(PROMPT_TABLES, (p.reward, p.length, p.tied), strict=True)
                   if rows)
    t = d.tokens
    tokens_line = (f"{t.compared} token{'s occur' if t.compared != 1 else ' occurs'} at least {MIN_TOKEN_COUNT} "
                   f"times among the trained tokens of both steps; {len(t.rises)} became more likely, "
                   f"{len(t.falls)} less likely." if t.compared else
                   f"No token occurs at least {MIN_TOKEN_COUNT} times among the trained tokens of both steps, so "
                   "no token's log π_θ can be compared.")
    return RunDiffPage(
        run_id=run_id, title=f"Step {d.a} against step {d.b}", a=_side(run_id, d.a, recorded),
        b=_side(run_id, d.b, recorded), run_url=urls.run(run_id), api_url=urls.run_diff_api(run_id, d.a, d.b),
        quantities=quantities, prompts_line=prompts_line, prompt_tables=tables, tokens_line=tokens_line,
        rises=tuple(_token_row(r) for r in t.rises[:TOP]), falls=tuple(_token_row(r) for r in t.falls[:TOP]),
        form=compare_form(run_id, recorded, d.a, d.b))


# -- the JSON twin ----------------------------------------------------------------------------------------------

__all__ = ["TOP", "RunDiffPage", "escaped", "run_diff_page"]
