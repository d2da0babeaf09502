"""Which runs the compare page compares (issue 50): `run=ID` two to eight times, `x=step|tokens`, refused by field
with the way out (the stored runs to pick from), as the page and its JSON twin both read it."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from app.runs.views.run_view import BadRunQuery

MIN_RUNS, MAX_RUNS = 2, 8
PARAMS = ("run", "x")
AXES = ("step", "tokens")


@dataclass(frozen=True)
class CompareQuery:
    ids: tuple[str, ...]
    x: str = "step"  # "step" | "tokens" (TRL's num_tokens: the tokens seen so far)


def _choices(stored: Sequence[str], given: Iterable[str] = ()) -> str:
    rest = [i for i in stored if i not in set(given)]
    if not rest:
        return ("no other run is stored: open one with `python -m app open RUN_DIR` or the upload page's "
                "“Open a whole run”")
    shown = ", ".join(rest[:MAX_RUNS]) + (f" and {len(rest) - MAX_RUNS} more" if len(rest) > MAX_RUNS else "")
    return f"stored runs you can add: {shown}"


def read_compare(items: Iterable[tuple[str, str]], stored: Sequence[str],
                 is_stored: Callable[[str], bool] | None = None) -> CompareQuery:
    """The query's runs and axis, or BadRunQuery naming `run` or `x` (or the unknown parameter). `stored`: every
    stored run's id, for the way out; `is_stored`: whether an id is a stored run (default: in `stored`)."""
    known = is_stored or set(stored).__contains__
    ids: list[str] = []
    axis: str | None = None
    for key, value in items:
        if key not in PARAMS:
            raise BadRunQuery(key, f"not a parameter of the run compare (it takes {', '.join(PARAMS)}: "
                                   "run=ID two to eight times, x=step or x=tokens)")
        if key == "x":
            if axis is not None:
                raise BadRunQuery("x", "given twice: x=step or x=tokens, once")
            if value not in AXES:
                raise BadRunQuery("x", f"expected step or tokens, got {value!r}")
            axis = value
            continue
        if value in ids:
            raise BadRunQuery("run", f"{value} is given twice: give each run once (drop the second run={value})")
        ids.append(value)
    if len(ids) < MIN_RUNS:
        got = "no run" if not ids else "1 run"
        raise BadRunQuery("run", f"{got} given; compare needs {MIN_RUNS} to {MAX_RUNS}, each as run=ID "
                                 f"({_choices(stored, ids)})")
    if len(ids) > MAX_RUNS:
        raise BadRunQuery("run", f"{len(ids)} runs given; compare at most {MAX_RUNS} at once: drop "
                                 f"{len(ids) - MAX_RUNS} of the run=… parameters")
    for ident in ids:
        if not known(ident):
            raise BadRunQuery("run", f"no stored run {ident!r} ({_choices(stored, ids)})")
    return CompareQuery(tuple(ids), axis or "step")


__all__ = ["AXES", "MAX_RUNS", "MIN_RUNS", "PARAMS", "CompareQuery", "read_compare"]
