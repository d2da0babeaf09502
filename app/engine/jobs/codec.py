"""Results to bytes and back, exactly: the job store keeps what a runner computed.

A result is a tree of frozen dataclasses, tuples, dicts, floats and tensors. It is written with
`torch.save` as plain containers (a dataclass becomes {"__dataclass__": name, fields...}) and
read with `torch.load(weights_only=True)`, whose unpickler builds only containers, numbers,
strings and tensors: bytes from the database can never run code. The dataclasses are rebuilt
from an allow-list the task names; an unknown name is an error, not an import.
"""
from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterable
from typing import Any

import torch

KEY = "__dataclass__"
TUPLE = "__tuple__"


class CodecError(ValueError):
    """Stored bytes that do not decode to the allowed types."""


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        body = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {KEY: type(value).__qualname__, **body}
    if isinstance(value, tuple):
        return {TUPLE: [_plain(v) for v in value]}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        if any(not isinstance(k, str) for k in value):
            return {"__pairs__": [[_plain(k), _plain(v)] for k, v in value.items()]}
        return {k: _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return value.detach().cpu().clone() if isinstance(value, torch.Tensor) else value
    if hasattr(value, "model_dump"):  # a pydantic model (a kind's specs): rebuilt by name
        return {KEY: type(value).__qualname__, "__pydantic__": value.model_dump(mode="python", by_alias=True)}
    raise CodecError(f"cannot store a {type(value).__name__} in a job result")


def dumps(result: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(_plain(result), buffer)
    return buffer.getvalue()


def loads(raw: bytes, types: Iterable[type]) -> Any:
    allowed = {t.__qualname__: t for t in types}
    try:
        tree = torch.load(io.BytesIO(raw), weights_only=True, map_location="cpu")
    except Exception as exc:  # the unpickler refused it: not bytes this codec wrote
        raise CodecError(f"stored result unreadable: {exc}") from exc
    return _rebuild(tree, allowed)


def _rebuild(value: Any, allowed: dict[str, type]) -> Any:
    if isinstance(value, list):
        return [_rebuild(v, allowed) for v in value]
    if not isinstance(value, dict):
        return value
    if TUPLE in value:
        return tuple(_rebuild(v, allowed) for v in value[TUPLE])
    if "__pairs__" in value:
        return {_rebuild(k, allowed): _rebuild(v, allowed) for k, v in value["__pairs__"]}
    if KEY in value:
        name = value[KEY]
        if name not in allowed:
            raise CodecError(f"stored result names type {name!r}, not one this task allows")
        cls: Any = allowed[name]
        if "__pydantic__" in value:
            return cls.model_validate(value["__pydantic__"])
        return cls(**{k: _rebuild(v, allowed) for k, v in value.items() if k != KEY})
    return {k: _rebuild(v, allowed) for k, v in value.items()}
