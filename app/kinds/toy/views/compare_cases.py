"""The one-click Compare cases: well-known GRPO failures, each a saved URL and one sentence.

Defined here only; the compare panel lists them on every step and tests/kinds/toy/test_compare_api.py
checks every sentence against the numbers the engine computes for its URL (so a sentence
cannot drift from what the page shows). Side A is the page's ordinary parameters, side B the
`vs_` conventions (docs/explanation/compare-mode.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from app.engine.grpo.params import Conventions
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.views.url_state import parse_compare


@dataclass(frozen=True)
class CompareCase:
    id: str
    title: str
    a: MappingProxyType[str, str]  # side A: the step's query parameters
    vs: MappingProxyType[str, str]  # side B: vs_ conventions
    sentence: str

    @property
    def params(self) -> GRPOParams:
        return GRPOParams(**self.a)

    @property
    def conventions(self) -> Conventions:
        request = parse_compare(self.vs)
        assert request.conventions is not None, request.errors
        return request.conventions


def _case(id: str, title: str, a: dict[str, str], vs: dict[str, str], sentence: str) -> CompareCase:
    return CompareCase(id, title, MappingProxyType(a), MappingProxyType(vs), sentence)


CASES = (
    _case("equal-rewards", "All rewards equal: β = 0 against β = 0.04",
          {"rewards": "1,1,1,1,1,1,1,1", "beta": "0"}, {"vs_beta": "0.04"},
          "Every completion earns reward 1, so every advantage is exactly 0. With β = 0 (A) the loss "
          "is exactly 0 and so is every gradient: the group teaches nothing. With β = 0.04 (B) the "
          "KL penalty alone still gives the policy a gradient, so it still moves."),
    _case("one-correct", "One correct answer out of eight: std or no std",
          {"rewards": "1,0,0,0,0,0,0,0"}, {"vs_advantage_std": "none"},
          "Only one of the eight completions earns a reward. Divided by the group's population std (A), "
          "it gets Â ≈ 2.645 (nearly √7) and the seven others −0.38 each; centred only (B, as Dr. GRPO "
          "does) they are 0.875 and −0.125. The std of a one-in-eight group is only 0.33, so "
          "dividing by it blows every advantage up about 3×."),
    _case("sample-std", "Sample std (TRL, verl) against population std (the paper)",
          {}, {"vs_advantage_std": "sample"},
          "TRL and verl divide by the sample (Bessel) std, the paper by the population std. On the "
          "same group no advantage changes sign, so the same rows are clipped; every advantage is "
          "multiplied by √((G−1)/G) = √(7/8) ≈ 0.935 (to within ε)."),
    _case("kl-times-ratio", "TRL's default KL (× ρ) against the paper's",
          {}, {"vs_kl_bias_correction": "true"},
          "Both sides use β = 0.04 and the same k3 estimate D. TRL's default "
          "(use_bias_correction_kl, B) multiplies each completion's D by its ratio ρ: the three "
          "completions with ρ ≈ 0.55 count only 55% of their KL, the five with ρ ≈ 1.13 count 13% more."),
)
CASE_IDS = tuple(c.id for c in CASES)
