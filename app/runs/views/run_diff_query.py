"""Which two recorded steps the run diff compares (issue 34): the query a page or the API sends (`a`, `b`), refused by
field when it cannot be answered, and the explorer's GET form that asks for them."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.runs.views import urls
from app.runs.views.run_view import BadRunQuery

PARAMS = ("a", "b")


def _steps_words(recorded: Mapping[int, str]) -> str:
    return f"this run's recorded steps are {', '.join(map(str, recorded)) or 'none'}"


def parse_step(param: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise BadRunQuery(param, f"expected a whole step number, got {raw!r}") from None


def check_pair(a: int | None, b: int | None, recorded: Mapping[int, str]) -> tuple[int, int]:
    """The two steps, or BadRunQuery naming the field: missing, not recorded, or the same step twice."""
    if len(recorded) < 2:
        raise BadRunQuery("a", f"a diff needs two recorded steps, and {_steps_words(recorded)}")
    for param, step in (("a", a), ("b", b)):
        if step is None:
            raise BadRunQuery(param, f"missing: the {'first' if param == 'a' else 'second'} step to compare "
                                     f"({_steps_words(recorded)})")
        if step not in recorded:
            raise BadRunQuery(param, f"step {step} was not recorded ({_steps_words(recorded)})")
    assert a is not None and b is not None
    if a == b:
        raise BadRunQuery("b", f"the same step as a ({a}): pick two different recorded steps")
    return a, b


def read_pair(items: Iterable[tuple[str, str]], recorded: Mapping[int, str]) -> tuple[int, int]:
    """The page's query: `a` and `b`, nothing else, each once."""
    found: dict[str, int] = {}
    for key, raw in items:
        if key not in PARAMS:
            raise BadRunQuery(key, f"not a parameter of the run diff (it takes {', '.join(PARAMS)})")
        if key in found:
            raise BadRunQuery(key, "given twice")
        found[key] = parse_step(key, raw)
    return check_pair(found.get("a"), found.get("b"), recorded)


@dataclass(frozen=True)
class CompareForm:
    """The GET form "Compare two recorded steps" (the explorer's and the diff page's)."""
    action: str
    steps: tuple[int, ...]
    a: int
    b: int


def compare_form(run_id: str, recorded: Iterable[int], a: int | None = None, b: int | None = None,
                 ) -> CompareForm | None:
    """`recorded`: the run's recorded steps. None with fewer than two; by default the first and the last."""
    steps = tuple(sorted(recorded))
    if len(steps) < 2:
        return None
    return CompareForm(urls.run_diff_action(run_id), steps, steps[0] if a is None else a,
                       steps[-1] if b is None else b)


__all__ = ["PARAMS", "CompareForm", "check_pair", "compare_form", "parse_step", "read_pair"]
