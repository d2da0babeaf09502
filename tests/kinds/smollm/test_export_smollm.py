"""The real model's whole module graph (issue 33), exported by the project's own exporter from the GRPO
objective around SmolLM2-135M-Instruct's configuration (app/kinds/smollm/engine/export_target.py): the
embedding, 30 blocks each holding its attention (q, k, v, o, RoPE, the scores' and the weighted sum's
matmuls, softmax), its SwiGLU MLP (gate, up, silu, ·, down), both norms and the two residual adds, then
the final norm and the tied lm_head, in three copies (policy, old, reference) under the shared GRPO head.
Laid out by Graphviz like every graph: the overview, the policy open, and block 12 open (times reported)."""
from __future__ import annotations

import json

import pytest
from reporting import report

from app.domain.snapshot import parse_snapshot
from app.export.document import export
from app.export.steps import read_steps
from app.kinds.smollm.engine.export_target import TARGETS
from app.views import graph_dot
from app.views.graph import build_graph_view

STEPS = {"title": "GRPO on SmolLM2-135M-Instruct", "viewport": {"width": 1100, "height": 700},
         "steps": [{"id": "sample", "title": "The model writes G answers", "note": "n",
                    "expanded": ["policy"], "selected": ["policy.token_logprobs"]},
                   {"id": "block", "title": "Where the gradient lands", "note": "n",
                    "expanded": ["policy", "policy.blocks.12"], "selected": ["policy.blocks.12.attention"]}]}


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    path = tmp_path_factory.mktemp("smollm") / "smollm.steps.json"
    path.write_text(json.dumps(STEPS))
    text = export(TARGETS[0], read_steps(path), "2026-12-03T00:00:00+00:00")
    return parse_snapshot(text, source="smollm export")


def test_every_block_has_its_parts_and_the_head_follows(snapshot):
    ids = set(snapshot.node_ids)
    for copy in ("policy", "old_policy", "reference_policy"):
        assert {f"{copy}.embed", f"{copy}.norm", f"{copy}.lm_head", f"{copy}.token_logprobs"} <= ids
        for b in range(30):
            block = f"{copy}.blocks.{b}"
            parts = {f"{block}.norm_1", f"{block}.norm_2", f"{block}.attention", f"{block}.mlp",
                     *(f"{block}.attention.{p}" for p in ("q", "k", "v", "o", "rope")),
                     *(f"{block}.mlp.{p}" for p in ("gate", "up", "down")),
                     f"softmax@{block}.attention#0", f"matmul@{block}.attention#0", f"matmul@{block}.attention#1",
                     f"silu@{block}.mlp#0", f"mul@{block}.mlp#0", f"add@{block}#0", f"add@{block}#1"}
            assert parts <= ids, (block, parts - ids)
        assert f"{copy}.blocks.30" not in ids
    assert {"advantages", "ratio", "clipped", "divergence", "aggregate", "neg@SmolLMGRPO#0"} <= ids
    q = snapshot.node("policy.blocks.12.attention.q")
    assert q.op == "Linear" and q.params.get("in_features") == 576 and q.params.get("out_features") == 576
    k = snapshot.node("policy.blocks.12.attention.k")
    assert k.params.get("out_features") == 192   # 3 key/value heads of 64: grouped-query attention
    assert snapshot.node("policy.blocks.12.mlp.gate").params.get("out_features") == 1536
    # the blocks nest as the modules do: block 12 is a member of policy.blocks (or of policy), its parts its members
    assert set(snapshot.node("policy.blocks.12.attention").members) >= {
        "policy.blocks.12.attention.q", "policy.blocks.12.attention.rope", "softmax@policy.blocks.12.attention#0"}


def test_the_graph_lays_out_closed_open_and_with_a_block_open(snapshot, request):
    graph_dot.cache_clear()
    views = {"overview": build_graph_view(snapshot, (), (), compact=True),
             "policy open": build_graph_view(snapshot, ("policy",), ("policy.token_logprobs",)),
             "block 12 open": build_graph_view(snapshot, ("policy", "policy.blocks.12"),
                                               ("policy.blocks.12.attention",))}
    lines = []
    for name, view in views.items():
        lines.append(f"{name}: {len(view.nodes)} boxes, {len(view.edges)} edges, dot {view.layout_seconds * 1000:.0f} ms, "
                     f"{view.bounds[2] - view.bounds[0]:.0f} x {view.bounds[3] - view.bounds[1]:.0f} units")
    report(request, "smollm graph layout: " + "; ".join(lines))
    overview, policy, block = views.values()
    assert {n.id for n in overview.nodes} >= {"policy", "old_policy", "reference_policy", "advantages"}
    assert not any(n.id.startswith("policy.") for n in overview.nodes)       # the blocks stay folded
    assert sum(n.id.startswith("policy.blocks.") and n.id.count(".") == 2 for n in policy.nodes) == 30
    assert "policy.blocks.12.attention" in {n.id for n in block.nodes}
    assert block.node("policy.blocks.12").is_container
