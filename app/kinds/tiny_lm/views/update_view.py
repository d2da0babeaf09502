"""The update step's explanation: why a completion with a negative advantage can still
become more likely. Reads the engine's re-runs of the update on parts of the loss
(engine/update_parts.py) and words them with this group's numbers; computes nothing but which
completion to tell about and which tokens it shares with the others."""
from __future__ import annotations

from dataclasses import dataclass

from app.kinds.tiny_lm.engine.token_records import TokenStepResult
from app.kinds.tiny_lm.engine.update_parts import UpdatePart
from app.views.numbers import readout


def signed(v: float) -> str:
    return ("+" if v > 0 else "") + readout(v)


@dataclass(frozen=True)
class UpdateRow:
    index: int
    text: str
    advantage: float
    part: UpdatePart

    @property
    def direction(self) -> str:
        d = self.part.all_terms
        return "more likely ↑" if d > 0 else ("less likely ↓" if d < 0 else "unchanged")

    @property
    def kl_effect(self) -> float:
        """What the completion's own KL term changes in its own-terms update."""
        return self.part.own - self.part.own_surrogate


@dataclass(frozen=True)
class UpdateView:
    rows: tuple[UpdateRow, ...]
    focus: int | None  # the negative-advantage completion that rose most, if any rose
    sentence: str


def _shared_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def build_update_view(result: TokenStepResult) -> UpdateView | None:
    if not result.update_parts:
        return None
    rows = tuple(UpdateRow(i, c.text, c.advantage, p)
                 for i, (c, p) in enumerate(zip(result.completions, result.update_parts, strict=True)))
    risers = [r for r in rows if r.advantage < 0 and r.part.all_terms > 0]
    if not risers:
        return UpdateView(rows, None, "Every completion with a negative advantage becomes less likely in this "
                          "update; the columns show how much of each change its own terms make.")
    r = max(risers, key=lambda x: x.part.all_terms)
    p = r.part
    tokens = [t.text for t in result.completions[r.index].tokens]
    pushed_up = [(i, c) for i, c in enumerate(result.completions) if c.advantage > 0]
    shares = sorted(((_shared_prefix(tokens, [t.text for t in c.tokens]), i) for i, c in pushed_up), reverse=True)
    share = ""
    if shares and shares[0][0] > 0:
        n = shares[0][0]
        same = sorted(i for k, i in shares if k == n)
        names = " and ".join(f"#{i}" for i in same)
        share = (f" {names} (A = {readout(result.completions[same[0]].advantage)}) begin with the same {n} tokens "
                 f"({''.join(tokens[:n])}), and raising them raises those tokens in #{r.index} too.")
    added = p.own + p.others - p.momentum_only
    lifted = ("So the rise comes from the others: every completion moves the same weights." if p.others > 0
              else "Neither part alone raises it: only their combination does.")
    sentence = (
        f"#{r.index} has A = {readout(r.advantage)}, yet this update makes it more likely: Σ Δ log π = "
        f"{signed(p.all_terms)}. The same AdamW step (same weights, same optimiser state) re-run on parts of "
        f"the loss: with no loss terms at all, the momentum of the {result.params.inner_steps} earlier steps "
        f"changes it by {signed(p.momentum_only)}; with only its own terms, by {signed(p.own)} (its own KL term "
        f"accounts for {signed(r.kl_effect)} of that: the reference pulls it back); with only the other "
        f"completions' terms, by {signed(p.others)}. {lifted}{share} The parts do not add up (own + others − "
        f"momentum = {signed(added)}, not {signed(p.all_terms)}) because AdamW divides each weight's step by "
        f"its running gradient size.")
    also = [x for x in risers if x is not r]
    if also:
        sentence += " Also more likely despite A < 0: " + "; ".join(
            f"#{x.index} ({signed(x.part.all_terms)}: own terms alone {signed(x.part.own)}, the others' "
            f"{signed(x.part.others)})" for x in also) + "."
    return UpdateView(rows, r.index, sentence)
