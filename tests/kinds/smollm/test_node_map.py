"""The real-model kind's rule: the kept fingerprints are the export target's traces' (tiny configurations,
with and without Qwen3's q/k norms), and it takes exactly such graphs, of any depth (the shipped walkthrough,
a 2-block file's), and no other kind's."""
from __future__ import annotations

from pathlib import Path

import pytest

from app.domain.snapshot.parsing import load_snapshot
from app.kinds.smollm.engine.node_map import (
    FINGERPRINTS,
    block_pattern,
    fingerprint,
    is_smollm_runnable,
    traced_pattern,
)

WALKTHROUGHS = Path(__file__).resolve().parents[3] / "walkthroughs"


@pytest.mark.parametrize(("name", "qk_norm"), [("llama", False), ("qk_norm", True)])
def test_the_kept_fingerprints_are_the_traced_graphs(name, qk_norm):
    assert fingerprint(traced_pattern(qk_norm)) == FINGERPRINTS[name], "the graph changed: renew node_map.FINGERPRINTS"


def test_qk_norms_are_nodes_of_their_own():
    extra = set(traced_pattern(True)) - set(traced_pattern(False))
    assert {"policy.blocks.*.attention.q_norm", "policy.blocks.*.attention.k_norm"} <= extra


def test_the_shipped_export_is_runnable_and_the_others_are_not():
    assert is_smollm_runnable(load_snapshot(WALKTHROUGHS / "smollm_grpo.tensorviz.json"))
    for other in ("toy_grpo", "tiny_lm_grpo"):
        assert not is_smollm_runnable(load_snapshot(WALKTHROUGHS / f"{other}.tensorviz.json"))


def test_one_op_changed_is_not_runnable():
    snapshot = load_snapshot(WALKTHROUGHS / "smollm_grpo.tensorviz.json")
    ops = {n: snapshot.node(n).op for n in snapshot.node_ids}
    ops["policy.blocks.3.mlp.up"] = "Conv1d"
    assert fingerprint(block_pattern(ops)) not in FINGERPRINTS.values()


def test_every_node_of_the_real_models_graph_has_words_of_its_own():
    from app.kinds.smollm.views.meaning import describe_smollm

    snapshot = load_snapshot(WALKTHROUGHS / "smollm_grpo.tensorviz.json")
    assert [n.node_id for n in snapshot.nodes if describe_smollm(snapshot, n) is None] == []
    assert describe_smollm(snapshot, snapshot.node("softmax@policy.blocks.12.attention#0")).display_name == \
        "Attention weights"
    assert describe_smollm(snapshot, snapshot.node("old_policy.blocks.3.mlp")).display_name == "SwiGLU MLP of π_old"
    tiny = load_snapshot(WALKTHROUGHS / "tiny_lm_grpo.tensorviz.json")
    assert describe_smollm(tiny, tiny.nodes[0]) is None  # another graph keeps its own words


def test_a_block_missing_a_node_or_a_gap_in_the_numbers_is_not_runnable():
    from app.kinds.smollm.engine.node_map import block_count, expand

    snapshot = load_snapshot(WALKTHROUGHS / "smollm_grpo.tensorviz.json")
    ids = set(snapshot.node_ids)
    pattern = block_pattern({n: snapshot.node(n).op for n in ids})
    assert block_count(ids) == 30 and expand(pattern, 30) == ids
    assert expand(pattern, 30) != ids - {"policy.blocks.7.attention.k"}
    fewer = ids - {"reference_policy.blocks.29.mlp.down"}
    assert expand(pattern, block_count(fewer)) != fewer
