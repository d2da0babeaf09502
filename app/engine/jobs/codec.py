"""Results to bytes and back, exactly: the job store keeps what a runner computed.

A result is a tree of frozen dataclasses, tuples, dicts, floats and tensors. It is written with
`torch.save` as plain containers (a dataclass becomes {"__dataclass__": name, fields...}) and
read with `torch.load(weights_only=True)`, whose unpickler builds only containers, numbers,
strings and tensors: bytes from the database can never run code. The dataclasses are rebuilt
from an allow-list the task names; an unknown name is an error, not an import.

That unpickler is plain Python, one step per opcode: a result holding millions of Python floats
(the real model's per-token norms: 1,825 nodes x G x L) took seconds to read in every process
that opened it. So a long run of floats (a tuple or list of them, or of equal-length rows of them)
is stored as a slice of ONE float64 tensor, the result's pool, which loads as one buffer, and
rebuilt as the same tuples and lists: exactly the same numbers (a Python float is a float64), nan,
inf and -0.0 included. One pool, not a tensor per run: torch.load spends ~0.25 ms on each tensor it
reads, and the real model's step has ~2,500 runs (its result read in 0.97 s with a tensor each,
0.3 s pooled, tests/jobs/test_runner.py's codec tests and bench/HISTORY.md).
"""
from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterable
from typing import Any

import torch

KEY = "__dataclass__"
TUPLE = "__tuple__"
FLOATS = "__floats__"
MIN_PACKED = 256  # floats in a run worth one tensor (below it the dict costs more than it saves)
SEQUENCES: dict[str, type] = {"tuple": tuple, "list": list}


class CodecError(ValueError):
    """Stored bytes that do not decode to the allowed types."""


def _all_floats(seq: Any) -> bool:
    return all(type(v) is float for v in seq)


POOLED = "__pooled__"  # the root of a result with a pool: {POOLED: 1, "tree": ..., "pool": float64 tensor}


def _packed(value: tuple | list, pool: list[float]) -> dict[str, Any] | None:
    """A run of floats, or of equal-length rows (all tuples or all lists) of floats, appended to `pool` and
    stored as its place there ({FLOATS: [offset, count, width]}); None for anything else (ints, bools,
    ragged rows, mixed types stay as they are)."""
    if not value:
        return None
    first = value[0]
    if type(first) is float:
        if len(value) >= MIN_PACKED and _all_floats(value):
            offset = len(pool)
            pool.extend(value)
            return {FLOATS: [offset, len(value), 0], "outer": type(value).__name__, "inner": None}
        return None
    if type(first) in (tuple, list) and first and type(first[0]) is float:
        inner, width = type(first), len(first)
        if len(value) * width >= MIN_PACKED and all(type(row) is inner and len(row) == width and _all_floats(row)
                                                    for row in value):
            offset = len(pool)
            for row in value:
                pool.extend(row)
            return {FLOATS: [offset, len(value) * width, width], "outer": type(value).__name__,
                    "inner": inner.__name__}
    return None


def _unpacked(value: dict[str, Any], pool: list[float] | None) -> tuple | list:
    outer, inner, place = SEQUENCES[value["outer"]], value["inner"], value[FLOATS]
    if isinstance(place, torch.Tensor):  # a result stored before the pool: one tensor per run
        rows = place.tolist()
        return outer([SEQUENCES[inner](row) for row in rows] if inner is not None else rows)
    if pool is None or not (isinstance(place, list) and len(place) == 3 and all(type(v) is int for v in place)):
        raise CodecError("stored result holds a malformed run of floats")
    offset, count, width = place
    if offset < 0 or count < 0 or offset + count > len(pool) or (inner is not None and (width <= 0 or count % width)):
        raise CodecError("stored result holds a run of floats outside its pool")
    if inner is None:
        return outer(pool[offset:offset + count])
    make = SEQUENCES[inner]
    return outer([make(pool[at:at + width]) for at in range(offset, offset + count, width)])


def _plain(value: Any, pool: list[float]) -> Any:
    if type(value) in (tuple, list) and (packed := _packed(value, pool)) is not None:
        return packed
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        body = {f.name: _plain(getattr(value, f.name), pool) for f in dataclasses.fields(value)}
        return {KEY: type(value).__qualname__, **body}
    if isinstance(value, tuple):
        return {TUPLE: [_plain(v, pool) for v in value]}
    if isinstance(value, list):
        return [_plain(v, pool) for v in value]
    if isinstance(value, dict):
        if any(not isinstance(k, str) for k in value):
            return {"__pairs__": [[_plain(k, pool), _plain(v, pool)] for k, v in value.items()]}
        return {k: _plain(v, pool) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return value.detach().cpu().clone() if isinstance(value, torch.Tensor) else value
    if hasattr(value, "model_dump"):  # a pydantic model (a kind's specs): rebuilt by name
        return {KEY: type(value).__qualname__, "__pydantic__": value.model_dump(mode="python", by_alias=True)}
    raise CodecError(f"cannot store a {type(value).__name__} in a job result")


def dumps(result: Any) -> bytes:
    pool: list[float] = []
    tree = _plain(result, pool)
    buffer = io.BytesIO()
    torch.save({POOLED: 1, "tree": tree, "pool": torch.tensor(pool, dtype=torch.float64)}, buffer)
    return buffer.getvalue()


def loads(raw: bytes, types: Iterable[type]) -> Any:
    allowed = {t.__qualname__: t for t in types}
    try:
        stored = torch.load(io.BytesIO(raw), weights_only=True, map_location="cpu")
    except Exception as exc:  # the unpickler refused it: not bytes this codec wrote
        raise CodecError(f"stored result unreadable: {exc}") from exc
    if isinstance(stored, dict) and stored.get(POOLED) == 1 and set(stored) == {POOLED, "tree", "pool"}:
        pool = stored["pool"]
        if not (isinstance(pool, torch.Tensor) and pool.dtype == torch.float64 and pool.dim() == 1):
            raise CodecError("stored result's pool of floats is malformed")
        return _rebuild(stored["tree"], allowed, pool.tolist())
    return _rebuild(stored, allowed, None)  # stored before the pool


def _rebuild(value: Any, allowed: dict[str, type], pool: list[float] | None) -> Any:
    if isinstance(value, list):
        return [_rebuild(v, allowed, pool) for v in value]
    if not isinstance(value, dict):
        return value
    if FLOATS in value:
        if value.get("outer") not in SEQUENCES or value.get("inner") not in (None, *SEQUENCES):
            raise CodecError("stored result holds a malformed run of floats")
        return _unpacked(value, pool)
    if TUPLE in value:
        return tuple(_rebuild(v, allowed, pool) for v in value[TUPLE])
    if "__pairs__" in value:
        return {_rebuild(k, allowed, pool): _rebuild(v, allowed, pool) for k, v in value["__pairs__"]}
    if KEY in value:
        name = value[KEY]
        if name not in allowed:
            raise CodecError(f"stored result names type {name!r}, not one this task allows")
        cls: Any = allowed[name]
        if "__pydantic__" in value:
            return cls.model_validate(value["__pydantic__"])
        return cls(**{k: _rebuild(v, allowed, pool) for k, v in value.items() if k != KEY})
    return {k: _rebuild(v, allowed, pool) for k, v in value.items()}
