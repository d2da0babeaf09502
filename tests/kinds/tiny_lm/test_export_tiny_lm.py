"""The exporter on the real tiny LM (issue 13): `--model tiny_lm` gives a file the app's loader
reads, with the blocks as nested module groups and each attention's softmax as a node."""
import json
import subprocess
import sys

from app.domain.snapshot import parse_snapshot

STEPS = {"title": "The tiny LM", "steps": [
    {"id": "tokens", "title": "Tokens in", "note": "ids to vectors", "expanded": [], "selected": ["embed"]},
    {"id": "attention", "title": "Attention", "note": "who reads whom",
     "expanded": ["blocks.0", "blocks.0.attention"], "selected": ["softmax@blocks.0.attention#0"]},
]}


def test_the_cli_exports_the_tiny_lm(tmp_path):
    steps, out = tmp_path / "tiny_lm.steps.json", tmp_path / "tiny_lm.tensorviz.json"
    steps.write_text(json.dumps(STEPS))
    subprocess.run([sys.executable, "-m", "app.export", "--model", "tiny_lm", "--steps", str(steps), "--out", str(out),
                    "--exported-at", "2026-11-30T00:00:00+00:00"], check=True, capture_output=True, timeout=120)
    snapshot = parse_snapshot(out.read_text(), source="tiny_lm export")
    ids = snapshot.node_ids
    for node in ("embed", "position", "blocks.0", "blocks.0.attention", "blocks.0.attention.qkv",
                 "softmax@blocks.0.attention#0", "blocks.1.mlp.down", "norm", "lm_head", "input", "output"):
        assert node in ids, node
    assert snapshot.node("blocks.0.attention.qkv").op == "Linear"
    assert {m.node_id for m in snapshot.modules} >= {"blocks.0", "blocks.0.attention", "blocks.0.mlp", "blocks.1"}
    assert [s.id for s in snapshot.steps] == ["tokens", "attention"]
