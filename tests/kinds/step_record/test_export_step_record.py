"""The record kind's graph (app/kinds/step_record/graph/step_record_head.tensorviz.json) is what the
exporter makes of the head model with the authored steps: re-exported here, byte for byte, so the
file the app opens every record with can never drift from the model or its steps."""
import subprocess
import sys

from paths import ROOT

from app.domain.snapshot import parse_snapshot

COMMITTED = ROOT / "app/kinds/step_record/graph/step_record_head.tensorviz.json"
STEPS = ROOT / "app/kinds/step_record/graph/step_record.steps.json"


def test_the_committed_head_graph_is_the_exporters(tmp_path):
    out = tmp_path / "head.tensorviz.json"
    subprocess.run([sys.executable, "-m", "app.export", "--model", "step_record", "--steps", str(STEPS),
                    "--out", str(out), "--exported-at", "2026-12-01T00:00:00+00:00"],
                   check=True, capture_output=True, timeout=120, cwd=ROOT)
    assert out.read_bytes() == COMMITTED.read_bytes()
    snapshot = parse_snapshot(out.read_text(), source="head export")
    assert [s.id for s in snapshot.steps] == ["group", "ratio", "kl", "loss", "diagnostics"]
    assert snapshot.node("policy").metadata.module_template_id == "model::RecordedPolicy"
