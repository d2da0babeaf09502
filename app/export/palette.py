"""Each node's `metadata.layerType` (its palette entry) and its `params`.

The entries for Input, Output, Module, Python, Linear, LogSoftmax and torch functions are
the user's exporter's own, copied from the seed export, so an exported model describes its
nodes exactly as the seed does. Any other torch.nn layer gets an entry built from its
constructor's signature. A parameter is written when it differs from the entry's default
value: the seed's Linear(3, 4) has `in_features` and `out_features` but no `bias`, and its
LogSoftmax(dim=1) has no params at all.
"""
from __future__ import annotations

import inspect
from typing import Any

from torch import nn

INPUT = {
    "id": "input", "name": "Input", "displayName": "Input", "description": "Model input node",
    "icon": "ArrowRight", "category": "io",
    "parameters": [
        {"name": "shape", "type": "string", "defaultValue": "1,3,224,224", "required": True,
         "description": "Input tensor shape (comma-separated, e.g., 1,3,224,224)"},
        {"name": "name", "type": "string", "defaultValue": "input", "required": False,
         "description": "Name for this input"},
    ],
}
OUTPUT = {
    "id": "output", "name": "Output", "displayName": "Output", "description": "Model output node",
    "icon": "ArrowLeft", "category": "io",
    "parameters": [{"name": "name", "type": "string", "defaultValue": "output", "required": False,
                    "description": "Name for this output"}],
}
MODULE = {
    "id": "module", "name": "Module", "displayName": "Module", "description": "Custom module group (nn.Module)",
    "icon": "Package", "category": "module",
    "parameters": [
        {"name": "name", "type": "string", "defaultValue": "CustomModule", "required": True,
         "description": "Module class name"},
        {"name": "description", "type": "string", "defaultValue": "", "required": False,
         "description": "Module description"},
    ],
}
PYTHON = {
    "id": "python", "name": "Python", "displayName": "Python",
    "description": "A statement from the source file that has no graph equivalent. Its code is kept verbatim "
                   "and its shape is unknown until the model is traced.",
    "icon": "Hash", "category": "misc", "parameters": [],
}
LAYERS: dict[str, dict[str, Any]] = {
    "Linear": {
        "id": "linear", "name": "Linear", "displayName": "Linear", "description": "Fully Connected Layer",
        "icon": "Minus", "category": "linear",
        "parameters": [
            {"name": "in_features", "type": "number", "defaultValue": 512, "required": True,
             "description": "Size of input features", "min": 1},
            {"name": "out_features", "type": "number", "defaultValue": 256, "required": True,
             "description": "Size of output features", "min": 1},
            {"name": "bias", "type": "boolean", "defaultValue": True, "required": False,
             "description": "If set to False, the layer will not learn an additive bias"},
        ],
    },
    "LogSoftmax": {
        "id": "logsoftmax", "name": "LogSoftmax", "displayName": "LogSoftmax",
        "description": "Log-Softmax over a dimension", "icon": "TrendingUp", "category": "activation",
        "parameters": [{"name": "dim", "type": "number", "defaultValue": 1, "required": True,
                        "description": "Dimension along which LogSoftmax is computed"}],
    },
}


def torch_function(op: str) -> dict[str, Any]:
    """`torch.sub` -> the seed's entry for a torch operation (its one generic `dim` parameter included)."""
    short = op.rsplit(".", 1)[-1]
    return {
        "id": short, "name": op, "displayName": op, "description": f"PyTorch {short} operation",
        "icon": "Activity", "category": "tensor",
        "parameters": [{"name": "dim", "type": "string", "defaultValue": "", "required": False,
                        "description": "Dimension(s) to apply the operation on"}],
    }


def _json_value(value: Any) -> Any:
    """A constructor argument as JSON, or None when it has no JSON form (a tensor, a module)."""
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list) and all(isinstance(v, bool | int | float | str) for v in value):
        return list(value)
    return None


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "number", float: "number", str: "string"}.get(type(value), "array")


def layer_entry(module: nn.Module) -> dict[str, Any]:
    """A torch.nn layer's palette entry: the seed's, or one read from its constructor."""
    cls = type(module)
    if cls.__name__ in LAYERS:
        return LAYERS[cls.__name__]
    doc = (inspect.getdoc(cls) or "").strip().splitlines()
    parameters = []
    for name, p in inspect.signature(cls.__init__).parameters.items():
        current = _json_value(getattr(module, name, None))
        if name in ("self", "device", "dtype") or current is None:
            continue
        default = None if p.default is inspect.Parameter.empty else _json_value(p.default)
        parameters.append({"name": name, "type": _json_type(current), "defaultValue": default,
                           "required": p.default is inspect.Parameter.empty, "description": name.replace("_", " ")})
    return {"id": cls.__name__.lower(), "name": cls.__name__, "displayName": cls.__name__,
            "description": doc[0] if doc else f"torch.nn.{cls.__name__}", "icon": "Box", "category": "layer",
            "parameters": parameters}


def layer_params(module: nn.Module, entry: dict[str, Any]) -> dict[str, Any]:
    """The module's values of its entry's parameters, where they differ from the defaults."""
    params: dict[str, Any] = {}
    for spec in entry["parameters"]:
        name = spec["name"]
        value = _json_value(getattr(module, name, None))
        if name == "bias" and isinstance(module, nn.Linear):
            value = module.bias is not None  # the attribute is the tensor; the argument was a flag
        if value is not None and value != spec.get("defaultValue"):
            params[name] = value
    return params
