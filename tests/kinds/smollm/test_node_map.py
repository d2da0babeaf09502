"""The real-model kind's rule: the kept fingerprint is the export target's trace's, and it takes exactly
that graph (the shipped walkthrough) and no other kind's."""
from __future__ import annotations

from pathlib import Path

from app.domain.snapshot.parsing import load_snapshot
from app.kinds.smollm.engine.node_map import FINGERPRINT, expected_ops, fingerprint, is_smollm_runnable

WALKTHROUGHS = Path(__file__).resolve().parents[3] / "walkthroughs"


def test_the_kept_fingerprint_is_the_traced_graphs():
    assert fingerprint(expected_ops()) == FINGERPRINT, "the model's graph changed: renew node_map.FINGERPRINT"


def test_the_shipped_export_is_runnable_and_the_others_are_not():
    assert is_smollm_runnable(load_snapshot(WALKTHROUGHS / "smollm_grpo.tensorviz.json"))
    for other in ("toy_grpo", "tiny_lm_grpo"):
        assert not is_smollm_runnable(load_snapshot(WALKTHROUGHS / f"{other}.tensorviz.json"))


def test_one_op_changed_is_not_runnable():
    snapshot = load_snapshot(WALKTHROUGHS / "smollm_grpo.tensorviz.json")
    ops = {n: snapshot.node(n).op for n in snapshot.node_ids}
    ops["policy.blocks.3.mlp.up"] = "Conv1d"
    assert fingerprint(ops) != FINGERPRINT


def test_every_node_of_the_real_models_graph_has_words_of_its_own():
    from app.kinds.smollm.views.meaning import describe_smollm

    snapshot = load_snapshot(WALKTHROUGHS / "smollm_grpo.tensorviz.json")
    assert [n.node_id for n in snapshot.nodes if describe_smollm(snapshot, n) is None] == []
    assert describe_smollm(snapshot, snapshot.node("softmax@policy.blocks.12.attention#0")).display_name == \
        "Attention weights"
    assert describe_smollm(snapshot, snapshot.node("old_policy.blocks.3.mlp")).display_name == "SwiGLU MLP of π_old"
    tiny = load_snapshot(WALKTHROUGHS / "tiny_lm_grpo.tensorviz.json")
    assert describe_smollm(tiny, tiny.nodes[0]) is None  # another graph keeps its own words
