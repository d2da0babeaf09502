"""A traced model and an authored steps file -> one `tensorviz.graph` version 3 file.

The file is shaped like the user's own export (the seed walkthrough in walkthroughs/): the
same keys in the same order, two-space indentation, non-ASCII written as \\u escapes. It is
deterministic: the same model, steps and `exportedAt` give the same bytes, and the
snapshotId is a hash of the document itself. Before it is written it is read back by the
app's own loader, so an export the app would refuse is never written.
"""
from __future__ import annotations

import hashlib
import json
import pathlib
from datetime import UTC, datetime
from typing import Any

import torch

from app.domain.snapshot import parse_snapshot
from app.domain.snapshot.models import FORMAT
from app.engine.export_target import ExportTarget
from app.engine.runtime.trace import trace_model
from app.export.graph import Graph, build_graph
from app.export.layout import layout
from app.export.steps import StepsFile, build_steps, check_against, stored_positions

VERSION, SCHEMA_VERSION = 3, 2


def trace_graph(target: ExportTarget) -> tuple[Graph, str]:
    """(the graph, the model's class name) of one forward pass of the target's example inputs."""
    with torch.random.fork_rng(devices=[]):  # building the model draws weights: keep the caller's RNG as it was
        torch.manual_seed(0)
        model, inputs = target.build()
    trace = trace_model(model, inputs, select_output=target.select_output,
                        statement_modules=target.statement_modules)
    return build_graph(trace, model), trace.model_name


def build_document(graph: Graph, model_name: str, steps: StepsFile, exported_at: str) -> dict[str, Any]:
    check_against(steps, graph)
    positions, _ = layout(graph)  # the document's own view: every module closed
    document = {
        "schemaVersion": SCHEMA_VERSION,
        "semantic": {"graph_id": "snapshot", "name": model_name, "revision": 0, "nodes": graph.nodes,
                     "edges": graph.edges, "inputs": [], "modules": [], "operations": [], "metadata": {}},
        "view": {"graph_id": "snapshot", "node_positions": stored_positions(graph, positions),
                 "collapsed_modules": graph.modules, "selection": [], "layout": {}},
    }
    digest = hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:16]
    snapshot_id = f"snapshot-{digest}"
    built = build_steps(steps, graph, {"snapshotId": snapshot_id, "exportedAt": exported_at, "modelName": model_name})
    by_id = {s["id"]: s for s in built}
    return {
        "format": FORMAT, "version": VERSION, "exportedAt": exported_at, "status": "static", "warningCount": 0,
        "document": document, "snapshotId": snapshot_id,
        "collaboration": {"walkthrough": {"title": steps.title, "steps": built}, "threads": [],
                          "savedViews": [by_id[v] for v in steps.saved_views],
                          "openingViewId": steps.opening_view_id or built[0]["id"]},
    }


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=True)


def export(target: ExportTarget, steps: StepsFile, exported_at: str) -> str:
    """The file's text, checked by the app's loader (which raises SnapshotError, naming the field)."""
    graph, model_name = trace_graph(target)
    text = render(build_document(graph, model_name, steps, exported_at))
    parse_snapshot(text, source=f"export of {target.name}")
    return text


def timestamp(epoch: float | None = None) -> str:
    """ISO 8601 in UTC, as the seed's `exportedAt`; `epoch` from SOURCE_DATE_EPOCH for reproducible builds."""
    moment = datetime.now(UTC) if epoch is None else datetime.fromtimestamp(epoch, UTC)
    return moment.isoformat()


def write(text: str, out: pathlib.Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)  # a reader (the app's catalog) never sees half a file
