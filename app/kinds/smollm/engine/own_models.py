"""Any Llama or Qwen GGUF file as a real-model walkthrough of its own (issue 48): the files the shared registry
lists (app/engine/lm/registry.py: GGUF_MODELS, `python -m app models add`) each get the default walkthrough's
six steps, with its graph traced on the file's configuration and its words sized by it.

The walkthrough file is made once per version of the GGUF file and of what it is made from (the authored
steps, the rule's fingerprints), and kept in DATA_DIR/models/walkthroughs/<id>.tensorviz.json beside a stamp
(<id>.model.json) naming the GGUF file it runs: the step's job reads the file from there. The exporter runs
as its own process (`python -m app.export --model smollm_grpo --from FILE`): the app never imports it.
"""
from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from app.engine.lm.check import UnsupportedModel
from app.engine.lm.registry import ModelFile, describe, listed
from app.kinds.smollm.engine.node_map import FINGERPRINTS
from app.kinds.smollm.engine.params import default_attention_block

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[4]
AUTHORED_STEPS = PROJECT_ROOT / "walkthroughs" / "steps" / "smollm_grpo.steps.json"
EXPORT_TIMEOUT_S = 900  # SmolLM2's graph (1,825 nodes) exports in ~8 s; a 0.5B model's in about a minute
EXPORTED_AT = "2026-01-01T00:00:00+00:00"  # fixed: a file made twice is the same file
TITLE = "GRPO on a real pretrained model: {name}"
AUTHORED_BLOCKS, AUTHORED_ATTENTION_BLOCK = 30, 12  # what the authored steps name (SmolLM2's depth)


def folder(data_dir: Path) -> Path:
    return Path(data_dir) / "models" / "walkthroughs"


def sample_note(model: ModelFile, note: str) -> str:
    """The sample step's note: its first sentence names the model and its sizes, the rest is the authored one's."""
    cfg = model.config
    first = (f"The old policy is the checkpoint itself: {model.name}, a {model.family} of {cfg.n_layer} blocks "
             f"(width {cfg.n_embd}, {cfg.n_head} query heads sharing {cfg.n_kv_head} key/value heads), reads the "
             f"chat-formatted prompt and writes G answers, token by token, until {model.end_token}.")
    return first + note[note.index(". Each of") + 1:] if ". Each of" in note else first


def steps_for(model: ModelFile, authored: dict[str, Any]) -> dict[str, Any]:
    """The authored steps file with this model's name, depth and attention block."""
    block = default_attention_block(model.config.n_layer)

    def sized(text: str) -> str:
        text = (text.replace(f"blocks.{AUTHORED_ATTENTION_BLOCK}", f"blocks.{block}")
                .replace(f"block {AUTHORED_ATTENTION_BLOCK}", f"block {block}")
                .replace(f"all {AUTHORED_BLOCKS} blocks", "both blocks" if model.config.n_layer == 2 else
                         f"all {model.config.n_layer} blocks")
                .replace(f"{AUTHORED_BLOCKS} blocks", f"{model.config.n_layer} blocks"))
        if model.config.qkv_bias:  # Qwen2's projections add a bias
            text = text.replace("q, k and v projections", "q, k and v projections (each with a bias)")
        if model.config.qk_norm:  # Qwen3 normalises each head of q and k before RoPE
            text = text.replace("rotary position embedding on q and k",
                                "an RMSNorm over each head of q and of k, rotary position embedding on both")
        return text

    steps = json.loads(sized(json.dumps(authored)))
    steps["title"] = TITLE.format(name=model.name)
    for step in steps["steps"]:
        if step["id"] == "sample":
            step["note"] = sample_note(model, step["note"])
    return steps


def _version(path: Path) -> str:
    """What a walkthrough file is made from: the GGUF file's version, the authored steps, the rule's
    fingerprints (a change of the graph's code changes them)."""
    stat = path.stat()
    made_of = [str(path), stat.st_size, stat.st_mtime_ns, AUTHORED_STEPS.read_text(encoding="utf-8"),
               sorted(FINGERPRINTS.values())]
    return hashlib.sha256(json.dumps(made_of).encode()).hexdigest()


def current_walkthrough(path: Path, data_dir: Path) -> Path | None:
    """The walkthrough already made from this version of the file, if any. Asked before the file is checked
    again: a process starting while memory is short (a compute worker beside a loaded model) serves what the
    first one checked, so every process of a server lists the same walkthroughs."""
    version = _version(path)
    for stamp in sorted(folder(data_dir).glob("*.model.json")):
        made = stamp.with_name(stamp.name.removesuffix(".model.json") + ".tensorviz.json")
        if made.is_file() and json.loads(stamp.read_text(encoding="utf-8")).get("version") == version:
            return made
    return None


def ensure_walkthrough(model: ModelFile, data_dir: Path) -> Path:
    """The model's walkthrough file, exported now unless its stamp says it is current. RuntimeError (with the
    exporter's own words) when the export fails."""
    version = _version(model.path)
    out = folder(data_dir) / f"{model.walkthrough_id}.tensorviz.json"
    stamp = out.with_name(f"{model.walkthrough_id}.model.json")
    if out.is_file() and stamp.is_file() and json.loads(stamp.read_text(encoding="utf-8")).get("version") == version:
        return out
    steps = steps_for(model, json.loads(AUTHORED_STEPS.read_text(encoding="utf-8")))
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        steps_file = Path(tmp) / "steps.json"
        steps_file.write_text(json.dumps(steps, ensure_ascii=False), encoding="utf-8")
        log.info("exporting the walkthrough of %s (%s)", model.name, model.path)
        done = subprocess.run([sys.executable, "-m", "app.export", "--model", "smollm_grpo", "--from", str(model.path),
                               "--steps", str(steps_file), "--out", str(out), "--exported-at", EXPORTED_AT],
                              cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"the export of {model.path.name} failed: {done.stderr.strip() or done.stdout.strip()}")
    tmp_stamp = stamp.with_name(stamp.name + ".tmp")
    tmp_stamp.write_text(json.dumps({"version": version, "path": str(model.path), "facts": facts_of(model)}) + "\n",
                         encoding="utf-8")
    tmp_stamp.replace(stamp)
    return out


def walkthrough_files(data_dir: Path, env: str | None = None) -> list[Path]:
    """Every listed model's walkthrough file (made where missing or stale). A file that cannot be used is
    left out with its reasons in the log; the others are served."""
    files = []
    for path in listed(data_dir, env):
        try:
            files.append(current_walkthrough(path, data_dir) or ensure_walkthrough(describe(path), data_dir))
        except (UnsupportedModel, OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
            log.warning("GGUF model %s is not served: %s", path, exc)
    return files


def facts_of(model: ModelFile) -> dict[str, Any]:
    """What the walkthrough's lists say of the model before its graph is read: its name and sizes, as the
    decoder states them on the graph (Decoder.graph_params), and its file's name."""
    cfg = model.config
    return {"name": model.name, "n_layer": cfg.n_layer, "n_embd": cfg.n_embd, "n_head": cfg.n_head,
            "n_kv_head": cfg.n_kv_head, "head_dim": cfg.head_dim, "ffn_dim": cfg.ffn_dim, "vocab_size": cfg.vocab_size,
            "tie_embeddings": cfg.tie_embeddings, "qkv_bias": cfg.qkv_bias, "qk_norm": cfg.qk_norm,
            "parameters": model.check.parameters, "file": model.path.name}


def stamp_of(walkthrough: Path) -> dict[str, Any]:
    """The stamp beside a made walkthrough file: its version, the GGUF file it runs, the model's facts."""
    stamp = walkthrough.with_name(walkthrough.name.removesuffix(".tensorviz.json") + ".model.json")
    return dict(json.loads(stamp.read_text(encoding="utf-8")))


def model_file(walkthrough_id: str, data_dir: Path) -> Path | None:
    """The GGUF file an added model's walkthrough runs (its stamp names it); None for any other walkthrough
    (the default model's: checkpoint.find_gguf)."""
    stamp = folder(data_dir) / f"{walkthrough_id}.model.json"
    if "/" in walkthrough_id or not stamp.is_file():
        return None
    return Path(json.loads(stamp.read_text(encoding="utf-8"))["path"])
