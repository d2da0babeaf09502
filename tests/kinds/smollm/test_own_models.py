"""Any Llama or Qwen GGUF file becomes a real-model walkthrough by its path alone (issue 48): `python -m app
models add FILE` checks it, makes its walkthrough (the graph traced on the file's configuration by the
exporter's own process) and remembers it in DATA_DIR; GGUF_MODELS names files for one server's life. Each is
listed by the API under an id from its `general.name`, runs as the real-model kind, and a step computes on
its own weights. A file the stack cannot run is refused with its reasons and nothing is remembered."""
from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest
from paths import ROOT

from app.__main__ import run_command
from app.engine.lm.registry import REMEMBERED, describe, walkthrough_id
from app.kinds.smollm.engine.own_models import AUTHORED_STEPS, steps_for

_spec = importlib.util.spec_from_file_location("gguf_families", ROOT / "tests" / "engine" / "lm" / "gguf_families.py")
assert _spec is not None and _spec.loader is not None
families = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("gguf_families", families)  # its dataclasses look their module up
_spec.loader.exec_module(families)

QWEN2_ID, QWEN3_ID = "tiny_qwen2_test_model_grpo", "tiny_qwen3_test_model_grpo"
SMALL = "group_size=2&max_new_tokens=4&seed=1"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("own-models")
    for family in ("qwen2", "qwen3"):
        families.write_family(folder / f"{family}.gguf", family)
    return folder


@pytest.fixture(scope="module")
def data_dir(files, tmp_path_factory):
    """A data directory where `models add` remembered the Qwen2 file (the command as a user runs it)."""
    data = tmp_path_factory.mktemp("own-models-data")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DATA_DIR", str(data))
        assert run_command("models", ["add", str(files / "qwen2.gguf")]) == 0
    return data


@pytest.fixture(scope="module")
def client(make_client, data_dir, files):
    """A server over that data directory, with the Qwen3 file named by GGUF_MODELS."""
    return make_client(walkthroughs_dir=ROOT / "walkthroughs", data_dir=data_dir,
                       gguf_models=str(files / "qwen3.gguf"), follow_redirects=False)


def test_the_id_comes_from_the_files_name():
    assert walkthrough_id("SmolLM2 135M Instruct") == "smollm2_135m_instruct_grpo"
    assert walkthrough_id("Qwen2.5-0.5B-Instruct") == "qwen2_5_0_5b_instruct_grpo"


def test_add_remembers_the_file_and_makes_its_walkthrough(data_dir, files):
    assert json.loads((data_dir / REMEMBERED).read_text())["models"] == [str((files / "qwen2.gguf").resolve())]
    made = data_dir / "models" / "walkthroughs" / f"{QWEN2_ID}.tensorviz.json"
    graph = json.loads(made.read_text())["document"]["semantic"]
    policy = next(n for n in graph["nodes"] if n["node_id"] == "policy")
    assert policy["params"]["n_layer"] == 2 and policy["params"]["qkv_bias"] is True  # the file's own sizes
    assert graph["name"] == "SmolLMGRPO"


def test_both_files_are_listed_and_run_as_the_real_model(client):
    listed = {w["id"]: w for w in client.get("/api/walkthroughs").json()}
    for wid in (QWEN2_ID, QWEN3_ID):
        assert wid in listed, sorted(listed)
        assert listed[wid]["runnable"] is True, listed[wid]
        assert "tiny" in listed[wid]["title"]
    page = client.get(f"/walkthroughs/{QWEN3_ID}/steps/attention")
    assert page.status_code == 200
    assert "policy.blocks.1.attention" in page.text  # block 1 of 2 (40 % of the depth), not SmolLM2's 12
    assert "an RMSNorm over each head of q and of k" in page.text  # the step's note knows Qwen3's shape
    sample = client.get(f"/walkthroughs/{QWEN2_ID}/steps/sample").text
    assert "a Qwen2 of 2 blocks (width 64, 4 query heads sharing 2 key/value heads)" in sample
    assert "&lt;|im_end|&gt;" in sample and "SmolLM2-135M" not in sample.split("Walkthroughs:")[0]


def test_the_start_page_lists_each_model_with_its_own_words(client):
    home = client.get("/").text
    for name, family in (("tiny qwen2 test model", "Qwen2"), ("tiny qwen3 test model", "Qwen3")):
        assert f"GRPO on your model: {name}" in home
        assert f"{name} ({family}, 2 blocks" in home


def test_a_step_computes_on_the_files_own_weights(client):
    api = f"/api/walkthroughs/{QWEN2_ID}/step?{SMALL}"
    assert client.post(api).status_code in (200, 202)
    deadline = time.monotonic() + 120
    while (answer := client.get(api)).status_code == 202:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    body = answer.json()
    assert body["state"] == "done", body
    result = body["result"]
    assert len(result["block_grad_norms"]) == 2 and result["attention_block"] == 1
    assert len(result["completions"]) == 2
    # the same parameters on the default model are another job, never started
    assert client.get(f"/api/walkthroughs/smollm_grpo/step?{SMALL}").status_code == 404


def test_a_block_the_model_lacks_is_a_422_naming_it(client):
    answer = client.get(f"/api/walkthroughs/{QWEN2_ID}/step?{SMALL}&attention_block=2")
    assert answer.status_code == 422
    assert "2 blocks" in answer.text and "attention_block" in answer.text


def test_a_file_it_cannot_run_is_refused_with_its_reasons(tmp_path, monkeypatch, capsys, files):
    bad = tmp_path / "other.gguf"
    families.write_family(bad, "qwen2")
    data = bytearray(bad.read_bytes())
    at = data.find(b"qwen2")  # general.architecture's value
    data[at:at + 5] = b"phi99"
    bad.write_bytes(bytes(data))
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    assert run_command("models", ["add", str(bad)]) == 1
    assert "cannot be used here" in capsys.readouterr().err
    assert not (tmp_path / "data" / REMEMBERED).exists()


def test_the_authored_steps_are_smollm2s_rendering():
    """The generated steps differ from the authored ones only where the model differs: rendered for SmolLM2's own
    name, sizes and end token, they are the authored file."""
    authored = json.loads(AUTHORED_STEPS.read_text())
    from dataclasses import replace

    from app.kinds.smollm.engine.model_config import SMOLLM2_135M
    model = replace(describe(Path(__import__("os").environ["SMOLLM_GGUF"])), name="SmolLM2-135M-Instruct",
                    architecture="llama", config=SMOLLM2_135M, end_token="<|im_end|>")
    assert steps_for(model, authored) == authored


def test_a_made_walkthrough_is_served_without_checking_the_file_again(data_dir, monkeypatch):
    """A process starting while memory is short (a compute worker beside a loaded model) lists what the first
    process checked and made: the file is not checked again while it and the steps are unchanged."""
    from app.kinds.smollm.engine import own_models

    def refuse(path):
        raise AssertionError(f"checked {path} again")
    monkeypatch.setattr(own_models, "describe", refuse)
    assert [p.name for p in own_models.walkthrough_files(data_dir, "")] == [f"{QWEN2_ID}.tensorviz.json"]
