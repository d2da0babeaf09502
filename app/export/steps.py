"""The authored steps file, and the walkthrough steps built from it.

An author writes what a step says and shows; the exporter computes where things are:

    {"title": "...", "viewport": {"width": 1100, "height": 700},
     "openingViewId": "advantages", "savedViews": ["advantages"],
     "steps": [{"id": "policy", "title": "...", "note": "...",
                "expanded": ["policy"], "selected": ["policy.logits"]}, ...]}

Each step gets its own positions (laid out with its modules open), a camera framing its
selected and expanded nodes, and, as in the seed, one anchor per selected node listing
the edges that touch it or its members.
"""
from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass
from typing import Any

from app.export.graph import Graph
from app.export.layout import frame, layout, number

DEFAULT_VIEWPORT = {"width": 1100, "height": 700}  # the seed's


class StepsError(ValueError):
    """A bad steps file; the message names the field, e.g. `steps[1].selected[0]`."""


@dataclass(frozen=True)
class AuthoredStep:
    id: str
    title: str
    note: str
    expanded: list[str]
    selected: list[str]


@dataclass(frozen=True)
class StepsFile:
    title: str
    viewport: dict[str, float]
    steps: list[AuthoredStep]
    saved_views: list[str]
    opening_view_id: str | None


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise StepsError(f"{where}: must be a list of node ids (strings)")
    return value


def read_steps(path: pathlib.Path) -> StepsFile:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StepsError(f"cannot read ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list) or not data["steps"]:
        raise StepsError("steps: must be a non-empty list")
    steps = []
    for i, raw in enumerate(data["steps"]):
        where = f"steps[{i}]"
        if not isinstance(raw, dict):
            raise StepsError(f"{where}: must be an object")
        for key in ("id", "title"):
            if not isinstance(raw.get(key), str) or not raw[key]:
                raise StepsError(f"{where}.{key}: must be a non-empty string")
        if not isinstance(raw.get("note", ""), str):
            raise StepsError(f"{where}.note: must be a string")
        steps.append(AuthoredStep(raw["id"], raw["title"], raw.get("note", ""),
                                  _strings(raw.get("expanded", []), f"{where}.expanded"),
                                  _strings(raw.get("selected", []), f"{where}.selected")))
    viewport = data.get("viewport", DEFAULT_VIEWPORT)
    if not isinstance(viewport, dict) or any(
            not isinstance(viewport.get(k), int | float) or viewport[k] <= 0 for k in ("width", "height")):
        raise StepsError("viewport: must be {\"width\": > 0, \"height\": > 0}")
    title = data.get("title", steps[0].title)
    if not isinstance(title, str):
        raise StepsError("title: must be a string")
    opening = data.get("openingViewId")
    if opening is not None and not isinstance(opening, str):
        raise StepsError("openingViewId: must be a step id")
    return StepsFile(title, {"width": viewport["width"], "height": viewport["height"]}, steps,
                     _strings(data.get("savedViews", []), "savedViews"), opening)


def check_against(steps: StepsFile, graph: Graph) -> None:
    """Every id the author names must be in the traced graph: a typo is an error, not a blank view."""
    known = {n["node_id"] for n in graph.nodes}
    ids = [s.id for s in steps.steps]
    for i, step in enumerate(steps.steps):
        if step.id in ids[:i]:
            raise StepsError(f"steps[{i}].id: duplicate id {step.id!r}")
        for j, node_id in enumerate(step.selected):
            if node_id not in known:
                raise StepsError(f"steps[{i}].selected[{j}]: unknown node {node_id!r} "
                                 f"(known: {', '.join(sorted(known))})")
        for j, node_id in enumerate(step.expanded):
            if node_id not in graph.modules:
                raise StepsError(f"steps[{i}].expanded[{j}]: {node_id!r} is not a module "
                                 f"(modules: {', '.join(graph.modules)})")
        # The app draws a member only inside open modules: a hidden choice would show nothing.
        for field, chosen in (("selected", step.selected), ("expanded", step.expanded)):
            for j, node_id in enumerate(chosen):
                up = graph.parent.get(node_id)
                while up is not None and up in step.expanded:
                    up = graph.parent.get(up)
                if up is not None:
                    raise StepsError(f"steps[{i}].{field}[{j}]: {node_id!r} lies inside {up!r}, "
                                     "which this step does not expand")
    for j, view_id in enumerate(steps.saved_views):
        if view_id not in ids:
            raise StepsError(f"savedViews[{j}]: {view_id!r} names no step")
    if steps.opening_view_id is not None and steps.opening_view_id not in ids:
        raise StepsError(f"openingViewId: {steps.opening_view_id!r} names no step")


def _compact(value: Any) -> str:
    # The seed nests JSON documents in strings this way: sorted keys, no spaces, \u escapes.
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _anchor(graph: Graph, node_id: str, stamp: dict[str, str]) -> dict[str, Any]:
    by_id = {n["node_id"]: n for n in graph.nodes}

    def described(n: str) -> dict[str, Any]:
        node = by_id[n]
        out = {"id": n, "kind": node["kind"], "op": node["op"], "params": node["params"]}
        if graph.parent.get(n) is not None:
            out["parent"] = graph.parent[n]
        return out

    around = {node_id, *graph.members.get(node_id, [])}
    touching = sorted((e["source_node_id"], e["target_node_id"]) for e in graph.edges
                      if e["source_node_id"] in around or e["target_node_id"] in around)
    context = {
        "connections": [_compact({"kind": "edge", "source": s, "sourcePort": "y", "target": t, "targetPort": "x"})
                        for s, t in touching],
        "contents": [_compact(described(m)) for m in graph.members.get(node_id, [])],
        "node": described(node_id),
    }
    return {"target": {"kind": "node", "nodeId": node_id}, **stamp, "context": _compact(context)}


def stored_positions(graph: Graph, positions: dict[str, tuple[float, float]]) -> dict[str, dict[str, float | int]]:
    """File order, whole numbers written as integers (as in the seed: `{"x": 24, "y": 214}`)."""
    return {n["node_id"]: {"x": number(positions[n["node_id"]][0]), "y": number(positions[n["node_id"]][1])}
            for n in graph.nodes}


def build_steps(steps: StepsFile, graph: Graph, stamp: dict[str, str]) -> list[dict[str, Any]]:
    """The format's steps; ``stamp`` is the snapshotId, exportedAt and modelName every anchor repeats."""
    viewport = (float(steps.viewport["width"]), float(steps.viewport["height"]))
    built = []
    for step in steps.steps:
        positions, boxes = layout(graph, step.expanded)
        framed = list(dict.fromkeys([*step.selected, *step.expanded])) or list(boxes)
        built.append({
            "id": step.id, "title": step.title, "note": step.note,
            "view": {"camera": frame([boxes[n] for n in framed], viewport),
                     "nodePositions": stored_positions(graph, positions),
                     "expandedModuleIds": step.expanded, "selectedNodeIds": step.selected,
                     "viewport": steps.viewport},
            "anchors": [_anchor(graph, n, stamp) for n in step.selected],
        })
    return built
