"""The words a learner meets, each defined where it is first used on a page.

A step's text is split into segments; the first use of each glossary term becomes a segment
that names the term, and the template draws it as a button that opens its definition (an
HTML popover: reachable by Tab, opened by Enter, closed by Esc; no script). Definitions say
what a thing does in the learner's words before giving its symbol (docs/design.md, "The story").
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    key: str
    title: str
    definition: str
    pattern: str  # a regex, matched case-insensitively on word boundaries
    # A regex the text just before the match must end with: a symbol that means two things (ε) is
    # this term only in its own context. Where both match, the term with a context wins.
    after: str | None = None


TERMS: tuple[Term, ...] = (
    Term("grpo", "GRPO", "Group Relative Policy Optimization (DeepSeekMath §4.1): PPO's clipped update "
         "without a critic; each answer is judged against the other answers to the same prompt.", r"GRPO"),
    Term("policy", "Policy", "The model being trained, seen as a probability for every answer it could give. "
         "Written π; π(answer) is how likely it is to give that answer.", r"polic(?:y|ies)"),
    Term("old-policy", "Old policy π_old", "A frozen copy of the policy from the moment the group was sampled. "
         "The ratio compares the policy being updated with it.", r"old[- ]polic(?:y|ies)|π_old|old-policy"),
    Term("reference", "Reference policy π_ref", "A frozen copy of the model before reinforcement learning. "
         "The KL penalty keeps the policy from drifting far from it.",
         r"reference polic(?:y|ies)|π_ref|reference model"),
    Term("group", "Group", "G answers sampled for the same prompt. GRPO compares their rewards with each "
         "other.", r"group"),
    Term("reward", "Reward", "The score a rule gives a whole answer: in DeepSeek-R1, is the final answer right, "
         "and is the format kept? Written r.", r"rewards?"),
    Term("advantage", "Advantage A", "How much better an answer scored than its group's average, in units of the "
         "group's spread: A = (r − mean) / std. Positive: make this answer more likely; negative: less likely.",
         r"advantages?"),
    Term("baseline", "Baseline", "What a reward is compared against to decide whether an answer was good. GRPO's "
         "baseline is the group's mean reward.", r"baselines?"),
    Term("critic", "Critic", "A second network (the value model) that PPO trains to predict rewards, used as its "
         "baseline. GRPO has none: the group's mean takes its place.", r"critic"),
    Term("ratio", "Ratio ρ", "How much more likely the policy being updated makes an answer than the old policy "
         "that sampled it: ρ = π / π_old. 1 means unchanged.", r"ratios?|ρ"),
    Term("std-epsilon", "ε in the advantage", "A tiny number added to the group's standard deviation before "
         "dividing (written ε_A: 0.0001 by default, 1e-6 under verl and DAPO), so a group whose rewards are all "
         "equal divides 0 by ε and gets advantages of 0 instead of dividing by zero. Not the clip range's ε.",
         r"ε(?:_A)?|epsilon",
         after=r"(?:deviation|std(?:_pop)?(?:\([^)]*\))?|σ)\s*(?:plus|\+)\s*$"),
    Term("epsilon", "Clip range ε", "How far the ratio may move before the clip stops rewarding further change: "
         "the band [1 − ε, 1 + ε]. ε = 0.2 by default.", r"ε|epsilon"),
    Term("clip", "Clip", "Past the band [1 − ε, 1 + ε], in the direction the advantage pushes, the objective stops "
         "growing: that answer gives no more gradient (the clip binds). Marked ✂.", r"clip(?:ped|ping|s)?"),
    Term("surrogate", "Surrogate objective", "What GRPO maximises instead of the expected reward itself: ratio × "
         "advantage, clipped. Near ρ = 1 its gradient points the same way as the true one.", r"surrogates?"),
    Term("kl", "KL divergence", "How far the policy's probabilities have moved from the reference policy's; 0 when "
         "they agree. GRPO subtracts β × an estimate of it from the objective.", r"KL"),
    Term("beta", "β", "The weight of the KL penalty: 0 turns it off.", r"β|beta"),
    Term("k3", "k3 estimator", "The per-answer KL estimate GRPO uses: e^Δ − Δ − 1 with Δ = log π_ref − log π. "
         "Never negative, 0 only where the two policies agree.", r"k3"),
    Term("log-prob", "log π", "The logarithm of the probability the model gives an answer or token: 0 is certain, "
         "more negative is less likely. Sums of log π over tokens are log-probabilities of whole answers.",
         r"log[- ]?π|log[- ]probabilit(?:y|ies)"),
    Term("token", "Token", "A piece of text the model reads or writes in one step (here: a digit, a sign, <end>).",
         r"tokens?"),
    Term("gspo", "GSPO", "Group Sequence Policy Optimization (Qwen, 2025): one ratio per answer, the geometric "
         "mean of its tokens' ratios, clipped and shared by all its tokens.", r"GSPO"),
    Term("cispo", "CISPO", "Clipped IS-weight Policy Optimization (MiniMax-M1, 2025): the ratio is capped and "
         "used as a constant weight on A × log π, so a capped token still gets a gradient.", r"CISPO"),
    Term("is-correction", "IS correction", "Importance-sampling correction: when a fast rollout engine (vLLM) "
         "sampled the answers, each token's push is multiplied by π_old / π_sampling, capped or masked.",
         r"IS correction|importance[- ]sampling correction"),
    Term("saturated", "Saturated", "A clipped ratio: the objective is flat there, so it gives no gradient.",
         r"saturated"),
)
_BY_KEY = {t.key: t for t in TERMS}
_PATTERNS = [(t.key, re.compile(rf"(?<![\w]){t.pattern}(?![\w])", re.IGNORECASE),
              re.compile(t.after, re.IGNORECASE) if t.after else None) for t in TERMS]
CONTEXT_SPAN = 40  # characters before a term that its context (`after`) may look at


def term(key: str) -> Term:
    return _BY_KEY[key]


@dataclass(frozen=True)
class Segment:
    text: str
    term: Term | None = None
    uid: str = ""  # unique on the page: the popover's id


def annotate(texts: Iterable[str], prefix: str = "g") -> list[list[Segment]]:
    """Each text as segments, with the first use of each term (across all the texts, in
    order) marked. Overlaps go to the earlier, then the longer, match ("old policy" over
    "policy"), then to a term whose context matched (the std's ε over the clip's)."""
    seen: set[str] = set()
    out: list[list[Segment]] = []
    for n, text in enumerate(texts):
        hits = sorted((m.start(), -(m.end() - m.start()), after is None, m.end(), key)
                      for key, pattern, after in _PATTERNS for m in pattern.finditer(text)
                      if after is None or after.search(text[max(0, m.start() - CONTEXT_SPAN):m.start()]))
        segments: list[Segment] = []
        at = 0
        for start, _, _, end, key in hits:
            if start < at or key in seen:
                continue
            seen.add(key)
            if start > at:
                segments.append(Segment(text[at:start]))
            segments.append(Segment(text[start:end], _BY_KEY[key], f"{prefix}{n}-{key}"))
            at = end
        if at < len(text):
            segments.append(Segment(text[at:]))
        out.append(segments)
    return out
