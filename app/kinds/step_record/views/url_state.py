"""The record kind's part of a view, as URL state: which group, completion and token window are on
screen, which number the token strip shows, and a "what if" convention to compare with.

`?group=2&completion=5&at=1024&metric=ratio&preset=dr_grpo` reopens exactly that view. The what-if
conventions are the shared Conventions fields (`preset` and any field), as on every kind's pages.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from app.engine.grpo.params import CONVENTION_FIELDS, Conventions
from app.views.tokens.window import WINDOW

METRICS = ("logprob", "advantage", "ratio", "kl", "weight", "grad", "entropy", "change")


class BadRecordView(ValueError):
    """A view value that does not exist (a group past the last one); the message names it."""


@dataclass(frozen=True)
class RecordQuery:
    group: int = 0
    completion: int = 0
    at: int = 0  # the window's first token, a multiple of WINDOW
    metric: str | None = None  # None: the step's own
    what_if: dict | None = None  # the given Conventions fields (None: no comparison)

    def query(self) -> dict[str, str]:
        q: dict[str, str] = {}
        if self.group:
            q["group"] = str(self.group)
        if self.completion:
            q["completion"] = str(self.completion)
        if self.at:
            q["at"] = str(self.at)
        if self.metric:
            q["metric"] = self.metric
        for name, value in (self.what_if or {}).items():
            q[name] = "none" if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
        return q

    def conventions(self, own: Conventions) -> Conventions | None:
        """The what-if's conventions. With a preset: the preset's, the fields given overriding it, and
        max_length (Dr. GRPO's constant) the record's unless given (the default 1 would scale a
        token_sum_norm loss by the record's max_length). Without one: the record's own conventions
        (`own`), field by field, with the given fields changed (`?advantage_epsilon=0` changes ε alone)."""
        if self.what_if is None:
            return None
        if "preset" in self.what_if:
            return Conventions(**{"max_length": own.max_length, **self.what_if})
        base = own.model_dump()
        if "clip_epsilon" in self.what_if and own.clip_epsilon_high == own.clip_epsilon:
            base.pop("clip_epsilon_high")  # the band's top follows ε, as a preset's does
        return Conventions(**{**base, **self.what_if})


def _index(raw: str | None, name: str, limit: int = 10**7) -> int:
    if raw is None or raw.strip() == "":
        return 0
    raw = raw.strip()
    if not raw.isdigit() or int(raw) > limit:
        raise BadRecordView(f"{name} must be a whole number from 0, got {raw!r}")
    return int(raw)


def read_record_query(query: Mapping[str, str]) -> RecordQuery:
    """The URL's values, checked for form only: whether a group exists is the screen's to say."""
    metric = query.get("metric") or None
    if metric is not None and metric not in METRICS:
        raise BadRecordView(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    given = {k: v.strip() for k in CONVENTION_FIELDS if (v := query.get(k)) is not None and v.strip() != ""}
    what_if = None
    if given:
        try:
            Conventions(**given)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "conventions"
            raise BadRecordView(f"{where}: {first['msg']}") from None
        what_if = given
    at = _index(query.get("at"), "at")
    return RecordQuery(_index(query.get("group"), "group"), _index(query.get("completion"), "completion"),
                       at - at % WINDOW, metric, what_if)
