"""What a rule says of a run (run_findings.py: the logged metrics' rules; token_findings.py: the per-token ones), and
how its sentences write numbers. Its own module so both rule sets build on it without importing each other."""
from __future__ import annotations

from dataclasses import dataclass, field

TIED_NAMES = ("frac_reward_zero_std", "samples/tied_group_share")  # TRL's logged share, else verl's dumps' (derived)


@dataclass(frozen=True)
class Finding:
    rule: str
    sentence: str
    steps: tuple[int, ...]  # the steps it points at (a link each)
    numbers: dict[str, float] = field(default_factory=dict)
    metrics: tuple[str, ...] = ()  # the logged metrics it reads, whose charts mark its steps


def pct(x: float) -> str:
    """Whole percents, except where rounding would say 0 % or 100 % of a share that is neither (99.7 %)."""
    whole = f"{100 * x:.0f}"
    if whole in ("0", "100") and 0 < x < 1:
        for digits in range(1, 7):
            text = f"{100 * x:.{digits}f}"
            if float(text) not in (0.0, 100.0):
                return f"{text} %"
    return f"{whole} %"


def num(x: float) -> str:
    return f"{x:.3g}"
