"""The exporter on a model it was not written for: three levels of nesting, torch and
torch.nn.functional calls between modules, a residual, an embedding fed token ids.

The next walkthrough (issue 13's tiny language model) will be shaped like this one.
"""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from bs4 import BeautifulSoup
from torch import nn

from app.domain.snapshot import parse_snapshot
from app.engine.export_target import ExportTarget
from app.engine.runtime.trace import trace_model
from app.export.document import export
from app.export.steps import StepsError, read_steps


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(4, 8), nn.Linear(8, 4, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm, self.mlp = nn.LayerNorm(4), Mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))  # the residual: a plain `+` carries both ends' data


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.block, self.head = nn.Embedding(10, 4), Block(), nn.Linear(4, 10)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.head(self.block(self.embed(tokens))), dim=-1)


TARGET = ExportTarget("tiny", "a test model", build=lambda: (TinyLM(), (torch.tensor([[1, 2, 3]]),)))


@pytest.fixture
def steps_file(tmp_path):
    path = tmp_path / "tiny.steps.json"
    path.write_text(json.dumps({"title": "Tiny", "steps": [
        {"id": "embed", "title": "Tokens in", "note": "ids to vectors", "expanded": [], "selected": ["embed"]},
        {"id": "mlp", "title": "Inside the MLP", "expanded": ["block", "block.mlp"], "selected": ["relu@block.mlp#0"]},
    ]}))
    return path


def test_nodes_kinds_ops_and_nesting(steps_file):
    snap = parse_snapshot(export(TARGET, read_steps(steps_file), "2026-01-01T00:00:00+00:00"))
    ops = {n.node_id: (n.kind, n.op, n.parent_id) for n in snap.nodes}
    assert ops == {
        "input": ("input", "Input", None), "output": ("output", "Output", None),
        "embed": ("layer", "Embedding", None), "block": ("module", "Module", None), "head": ("layer", "Linear", None),
        "log_softmax@TinyLM#0": ("layer", "torch.nn.functional.log_softmax", None),
        "block.norm": ("layer", "LayerNorm", "block"), "block.mlp": ("module", "Module", "block"),
        "block.mlp.up": ("layer", "Linear", "block.mlp"), "block.mlp.down": ("layer", "Linear", "block.mlp"),
        "relu@block.mlp#0": ("layer", "torch.relu", "block.mlp"),
    }
    assert snap.node("block").members == ["block.norm", "block.mlp"]
    assert snap.node("block.mlp").members == ["block.mlp.up", "block.mlp.down", "relu@block.mlp#0"]
    assert snap.node("block.mlp").metadata.module_template_id == "model::Mlp"
    assert snap.node("block.mlp.down").params == {"in_features": 8, "out_features": 4, "bias": False}
    assert snap.node("embed").params["embedding_dim"] == 4
    assert snap.node("input").params["shape"] == "1,3"


def test_edges_at_every_level(steps_file):
    snap = parse_snapshot(export(TARGET, read_steps(steps_file), "2026-01-01T00:00:00+00:00"))
    edges = {(e.source_node_id, e.target_node_id) for e in snap.edges}
    assert {("input", "embed"), ("embed", "block.norm"), ("embed", "block"),  # into a module, at both levels
            ("block.mlp.up", "relu@block.mlp#0"), ("relu@block.mlp#0", "block.mlp.down"),
            ("block.norm", "block.mlp.up"), ("block.norm", "block.mlp"),  # block's inner level
            ("block.mlp.down", "head"), ("block.mlp", "head"), ("block", "head"),  # out of three levels
            ("embed", "head"),  # the residual skips the block
            ("head", "log_softmax@TinyLM#0"), ("log_softmax@TinyLM#0", "output")} == edges


def test_members_sit_inside_their_open_module(steps_file):
    snap = parse_snapshot(export(TARGET, read_steps(steps_file), "2026-01-01T00:00:00+00:00"))
    step = snap.step("mlp")
    assert step.view.expanded_module_ids == ["block", "block.mlp"]
    assert step.view.node_positions["block.mlp.up"].x >= 24  # relative to block.mlp, below its header
    assert step.view.node_positions["block.mlp.up"].y >= 70


def test_the_app_draws_it_view_only(steps_file, tmp_path, make_client):
    folder = tmp_path / "walkthroughs"
    folder.mkdir()
    (folder / "tiny.tensorviz.json").write_text(export(TARGET, read_steps(steps_file), "2026-01-01T00:00:00+00:00"))
    client = make_client(walkthroughs_dir=folder)
    page = BeautifulSoup(client.get("/walkthroughs/tiny/steps/mlp").text, "html.parser")
    assert [n["data-node-id"] for n in page.select(".graph .node.selected")] == ["relu@block.mlp#0"]
    assert client.get("/api/walkthroughs/tiny/step").status_code == 409  # no runnable model matches it


def test_steps_naming_what_the_trace_lacks_are_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"steps": [{"id": "a", "title": "A", "expanded": ["embed"]}]}))
    with pytest.raises(StepsError, match=r"steps\[0\]\.expanded\[0\]: 'embed' is not a module"):
        export(TARGET, read_steps(bad), "2026-01-01T00:00:00+00:00")


def test_steps_choosing_what_a_closed_module_hides_are_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"steps": [{"id": "a", "title": "A", "expanded": ["block.mlp"],
                                          "selected": ["block.mlp.up"]}]}))
    with pytest.raises(StepsError, match=r"steps\[0\]\.selected\[0\]: 'block.mlp.up' lies inside 'block', which"):
        export(TARGET, read_steps(bad), "2026-01-01T00:00:00+00:00")


def test_indexing_reads_the_indexed_tensor_not_the_index():
    class Pick(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scores = nn.Linear(2, 3)

        def forward(self, x: torch.Tensor, which: torch.Tensor) -> torch.Tensor:
            return torch.exp(self.scores(x)[0, which])

    trace = trace_model(Pick(), (torch.ones(1, 2), torch.tensor([0, 2])))
    assert trace.flows == [("input", "scores"), ("scores", "exp@Pick#0"), ("exp@Pick#0", "output")]


def test_a_submodule_belongs_to_the_module_that_declares_it_whoever_calls_it():
    class Pair(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(2, 2), nn.Linear(2, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(x)

    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pair, self.unused_group = Pair(), Pair()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            # pair.a is called from here, not from pair's forward; unused_group never runs whole
            return self.pair(self.pair.a(x)) + self.unused_group.a(x)

    trace = trace_model(Outer(), (torch.ones(1, 2),))
    parents = {n.node_id: n.parent for n in trace.nodes.values()}
    assert parents["pair.a"] == "pair" and parents["pair.b"] == "pair"
    assert parents["unused_group.a"] is None  # its group is no node: it stands at the top level
    assert "unused_group" not in parents and "unused_group.b" not in parents
