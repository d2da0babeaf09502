"""Results to bytes and back, exactly: the job store keeps what a runner computed.

A result is a tree of frozen dataclasses, tuples, dicts, floats and tensors. It is stored as
`torch.save` of a dict of four things, read with `torch.load(weights_only=True)`, whose unpickler
builds only containers, numbers, strings and tensors:
- `tree`: the result as JSON text (a dataclass is {"__dataclass__": name, fields...}, a tuple
  {"__tuple__": [...]}, a tensor {"__tensor__": i}, a long run of floats {"__floats__": [offset,
  count, width]}). JSON cannot run code either, so bytes from the database never do; the
  dataclasses are rebuilt from an allow-list the task names (an unknown name is an error, not an
  import). A float is written as its repr, which reads back as the same float64.
- `pool`: every long run of floats (a tuple or list of ≥ 256, or of equal-length rows of them) and
  every `array('d')`, appended to ONE float64 tensor, rebuilt as the same tuples, lists and arrays:
  every bit, nan's included. An array comes back as a slice of the pool's bytes, never as Python
  floats: a result keeps its bulk (the real model's per-token norms) as arrays, which cost nothing
  to read until a page reads them.
- `tensors`: the result's own tensors, as they were.

Why this shape, measured on the real model's step result (1,825 nodes of per-token norms, ~2.6M
floats, 74k containers): torch.load's unpickler is plain Python, one step per opcode, and spends
~0.25 ms on each tensor it reads. Pickled whole with a tensor per run of floats it read in 0.97 s
in every process that opened it; with one pool 0.57 s, of which 0.35 s was the unpickler on the
containers. json.loads (C) reads the same containers in ~0.04 s, and its object_hook rebuilds the
dataclasses on the way: 0.19 s; with the norms as arrays ~0.07 s (tests/jobs/test_runner.py;
bench/HISTORY.md).
"""
from __future__ import annotations

import dataclasses
import io
import json
from array import array
from collections.abc import Callable, Iterable
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


FORMAT = "__codec__"
TENSOR = "__tensor__"
ARRAY = "__array__"  # an array('d'): {ARRAY: [offset, count]} in the pool
PAIRS = "__pairs__"
PYDANTIC = "__pydantic__"
VERSION = 2


def _packed(value: tuple | list, pool: array) -> dict[str, Any] | None:
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


def _unpacked(value: dict[str, Any], pool: array | None) -> tuple | list:
    if value.get("outer") not in SEQUENCES or value.get("inner") not in (None, *SEQUENCES):
        raise CodecError("stored result holds a malformed run of floats")
    outer, inner, place = SEQUENCES[value["outer"]], value["inner"], value[FLOATS]
    if isinstance(place, torch.Tensor):  # a result stored before the pool: one tensor per run
        rows = place.tolist()
        return outer([SEQUENCES[inner](row) for row in rows] if inner is not None else rows)
    if pool is None or not (isinstance(place, list) and len(place) == 3 and all(type(v) is int for v in place)):
        raise CodecError("stored result holds a malformed run of floats")
    offset, count, width = place
    if offset < 0 or count < 0 or offset + count > len(pool) or (inner is not None and (width <= 0 or count % width)):
        raise CodecError("stored result holds a run of floats outside its pool")
    floats = pool[offset:offset + count].tolist()
    if inner is None:
        return outer(floats)
    make = SEQUENCES[inner]
    return outer([make(floats[at:at + width]) for at in range(0, count, width)])


def _array(value: dict[str, Any], pool: array) -> array:
    place = value[ARRAY]
    if not (isinstance(place, list) and len(place) == 2 and all(type(v) is int for v in place)):
        raise CodecError("stored result holds a malformed array")
    offset, count = place
    if offset < 0 or count < 0 or offset + count > len(pool):
        raise CodecError("stored result holds an array outside its pool")
    return pool[offset:offset + count]


def _plain(value: Any, pool: array, tensors: list[torch.Tensor]) -> Any:
    if type(value) in (tuple, list) and (packed := _packed(value, pool)) is not None:
        return packed
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        body = {f.name: _plain(getattr(value, f.name), pool, tensors) for f in dataclasses.fields(value)}
        return {KEY: type(value).__qualname__, **body}
    if isinstance(value, tuple):
        return {TUPLE: [_plain(v, pool, tensors) for v in value]}
    if isinstance(value, list):
        return [_plain(v, pool, tensors) for v in value]
    if isinstance(value, dict):
        if any(not isinstance(k, str) for k in value):
            return {PAIRS: [[_plain(k, pool, tensors), _plain(v, pool, tensors)] for k, v in value.items()]}
        return {k: _plain(v, pool, tensors) for k, v in value.items()}
    if isinstance(value, array):
        if value.typecode != "d":
            raise CodecError(f"cannot store an array of typecode {value.typecode!r} in a job result (only 'd')")
        offset = len(pool)
        pool.extend(value)
        return {ARRAY: [offset, len(value)]}
    if isinstance(value, torch.Tensor):
        tensors.append(value.detach().cpu().clone())
        return {TENSOR: len(tensors) - 1}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "model_dump"):  # a pydantic model (a kind's specs): rebuilt by name
        return {KEY: type(value).__qualname__, PYDANTIC: value.model_dump(mode="python", by_alias=True)}
    raise CodecError(f"cannot store a {type(value).__name__} in a job result")


def dumps(result: Any) -> bytes:
    pool = array("d")
    tensors: list[torch.Tensor] = []
    tree = json.dumps(_plain(result, pool, tensors), separators=(",", ":"))  # floats as repr: exact; nan as NaN
    floats = torch.frombuffer(bytearray(pool.tobytes()), dtype=torch.float64) if pool else torch.zeros(0).double()
    buffer = io.BytesIO()
    torch.save({FORMAT: VERSION, "tree": tree, "pool": floats, "tensors": tensors}, buffer)
    return buffer.getvalue()


def loads(raw: bytes, types: Iterable[type]) -> Any:
    allowed = {t.__qualname__: t for t in types}
    try:
        stored = torch.load(io.BytesIO(raw), weights_only=True, map_location="cpu")
    except Exception as exc:  # the unpickler refused it: not bytes this codec wrote
        raise CodecError(f"stored result unreadable: {exc}") from exc
    if not (isinstance(stored, dict) and FORMAT in stored):
        return _rebuild(stored, allowed)  # stored before the JSON tree: the containers pickled
    pool, tensors, tree = stored.get("pool"), stored.get("tensors"), stored.get("tree")
    if stored[FORMAT] != VERSION or set(stored) != {FORMAT, "tree", "pool", "tensors"}:
        raise CodecError(f"stored result has an unknown layout (version {stored[FORMAT]!r})")
    if not (isinstance(pool, torch.Tensor) and pool.dtype == torch.float64 and pool.dim() == 1):
        raise CodecError("stored result's pool of floats is malformed")
    if not (isinstance(tensors, list) and all(isinstance(t, torch.Tensor) for t in tensors) and isinstance(tree, str)):
        raise CodecError("stored result's tree or tensors are malformed")
    try:
        floats = array("d")
        floats.frombytes(pool.contiguous().numpy().tobytes())  # the buffer as is: no Python float made
        return json.loads(tree, object_hook=_hook(allowed, floats, tensors))
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        if isinstance(exc, CodecError):
            raise
        raise CodecError(f"stored result unreadable: {exc}") from exc


def _hook(allowed: dict[str, type], pool: array, tensors: list[torch.Tensor]) -> Callable[[dict], Any]:
    """json's object_hook: each object as the parser finishes it (its members are rebuilt already)."""
    def rebuild(value: dict[str, Any]) -> Any:
        if len(value) <= 3:  # every marker object is this small; most plain dicts and dataclasses are not
            if TUPLE in value:
                return tuple(value[TUPLE])
            if FLOATS in value:
                return _unpacked(value, pool)
            if ARRAY in value:
                return _array(value, pool)
            if TENSOR in value:
                index = value[TENSOR]
                if type(index) is not int or not 0 <= index < len(tensors):
                    raise CodecError("stored result names a tensor it does not hold")
                return tensors[index]
            if PAIRS in value:
                return {k: v for k, v in value[PAIRS]}
        if KEY in value:
            return _instance(value, allowed, lambda fields: fields)
        return value
    return rebuild


def _instance(value: dict[str, Any], allowed: dict[str, type], rebuilt: Callable[[dict], dict]) -> Any:
    name = value[KEY]
    if name not in allowed:
        raise CodecError(f"stored result names type {name!r}, not one this task allows")
    cls: Any = allowed[name]
    if PYDANTIC in value:
        return cls.model_validate(value[PYDANTIC])
    return cls(**rebuilt({k: v for k, v in value.items() if k != KEY}))


def _rebuild(value: Any, allowed: dict[str, type]) -> Any:
    """A result stored before the JSON tree (its containers pickled, a tensor per run of floats)."""
    if isinstance(value, list):
        return [_rebuild(v, allowed) for v in value]
    if not isinstance(value, dict):
        return value
    if FLOATS in value:
        return _unpacked(value, None)
    if TUPLE in value:
        return tuple(_rebuild(v, allowed) for v in value[TUPLE])
    if PAIRS in value:
        return {_rebuild(k, allowed): _rebuild(v, allowed) for k, v in value[PAIRS]}
    if KEY in value:
        return _instance(value, allowed, lambda fields: {k: _rebuild(v, allowed) for k, v in fields.items()})
    return {k: _rebuild(v, allowed) for k, v in value.items()}
