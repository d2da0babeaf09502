"""Per-token arrays of a step record: JSON lists, or little-endian bytes in base64 (compact).

A G 16 x 4,096-token step holds 65,536 values per array; as decimal text a float32 log-prob is
about 11 characters, as base64 float32 about 5.3, so writers may choose either. Both read into
numpy arrays (float64 for log-probs, int64 for ids) without a Python loop over the values.
"""
from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any

import numpy as np
from pydantic import BeforeValidator, WithJsonSchema

DTYPES = {"float32": "<f4", "float64": "<f8", "int32": "<i4", "int64": "<i8"}
MAX_VALUES = 1 << 20  # per array: a completion of a million tokens is not a GRPO step

_PACKED_SCHEMA = {
    "type": "object",
    "required": ["dtype", "base64"],
    "additionalProperties": False,
    "properties": {
        "dtype": {"enum": list(DTYPES)},
        "base64": {"type": "string", "contentEncoding": "base64",
                   "description": "the values as little-endian bytes"},
    },
}


def _unpack(value: dict) -> np.ndarray:
    if set(value) != {"dtype", "base64"}:
        raise ValueError("a packed array has exactly the keys `dtype` and `base64`")
    dtype = DTYPES.get(value["dtype"]) if isinstance(value["dtype"], str) else None
    if dtype is None:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}")
    if not isinstance(value["base64"], str):
        raise ValueError("base64 must be a string")
    try:
        data = base64.b64decode(value["base64"], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("base64 is not valid base64 text") from None
    size = np.dtype(dtype).itemsize
    if len(data) % size:
        raise ValueError(f"{len(data)} bytes are not a whole number of {value['dtype']} values")
    return np.frombuffer(data, dtype=dtype)


# what a plain list may hold: JSON numbers (json.loads gives int and float), as the schema's "items" say;
# numpy would read "0.5" or true as a number, so the types are checked first (a set of the types: in C)
_NUMBER_TYPES: dict[str, tuple[type, ...]] = {"float": (int, float, np.integer, np.floating), "int": (int, np.integer)}
_PLAIN_TYPES: dict[str, set[type]] = {"float": {int, float}, "int": {int}}


def _json_numbers(value: list, kind: str) -> None:
    if set(map(type, value)) <= _PLAIN_TYPES[kind]:
        return
    allowed = _NUMBER_TYPES[kind]
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, allowed):
            raise ValueError(f"must hold {'integers' if kind == 'int' else 'numbers'} only: value {i} is "
                             f"{describe(v)}")


def describe(v: Any) -> str:
    """A JSON value as a refusal names it: `the string "0.5"`, `true`, `null`, `3.5`, `a list`."""
    if isinstance(v, str):
        return f"the string {json.dumps(v[:40] + ('…' if len(v) > 40 else ''), ensure_ascii=False)}"
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, int | float | np.integer | np.floating):
        return repr(v.item() if isinstance(v, np.generic) else v)
    if isinstance(v, list | dict):
        return "a list" if isinstance(v, list) else "an object"
    return f"a {type(v).__name__}"


def _array(value: Any, kind: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        out = value
    elif isinstance(value, dict):
        out = _unpack(value)
    elif isinstance(value, list):
        _json_numbers(value, kind)
        # numpy reads the list in C: no Python loop over 65,536 values
        try:
            out = np.asarray(value, dtype=np.float64) if kind == "float" else np.asarray(value)
        except (ValueError, TypeError, OverflowError):
            raise ValueError("must hold numbers only") from None
        if kind == "int" and out.size == 0:
            out = out.astype(np.int64)
    else:
        raise ValueError("must be a list of numbers or {\"dtype\", \"base64\"}")
    if out.ndim != 1:
        raise ValueError("must be a flat list")
    if out.size > MAX_VALUES:
        raise ValueError(f"{out.size} values exceed the limit of {MAX_VALUES}")
    if kind == "int":
        if out.dtype.kind != "i":
            raise ValueError("token ids must be integers (dtype int32 or int64)")
        return out.astype(np.int64, copy=False)
    if out.dtype.kind not in "iuf":  # an ndarray handed in from Python: of bools or strings, say
        raise ValueError(f"must hold numbers only, not {out.dtype} values")
    out = out.astype(np.float64)
    if not np.isfinite(out).all():
        where = int(np.flatnonzero(~np.isfinite(out))[0])
        raise ValueError(f"value {where} is {out[where]}: log-probs and entropies must be finite numbers")
    return out


def _schema(kind: str) -> dict:
    item = {"type": "integer"} if kind == "int" else {"type": "number"}
    return {"oneOf": [{"type": "array", "items": item, "maxItems": MAX_VALUES}, _PACKED_SCHEMA]}


FloatArray = Annotated[np.ndarray, BeforeValidator(lambda v: _array(v, "float")), WithJsonSchema(_schema("float"))]
IntArray = Annotated[np.ndarray, BeforeValidator(lambda v: _array(v, "int")), WithJsonSchema(_schema("int"))]


def pack(values: Any, dtype: str = "float32") -> dict[str, str]:
    """The compact form of `values` (what writers such as the TRL recorder emit)."""
    data = np.ascontiguousarray(np.asarray(values, dtype=DTYPES[dtype])).tobytes()
    return {"dtype": dtype, "base64": base64.b64encode(data).decode("ascii")}
