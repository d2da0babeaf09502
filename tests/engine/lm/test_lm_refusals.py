"""A GGUF file the stack cannot use is refused before anything is loaded (app/engine/lm/check.py), each reason
named: another architecture (with the supported ones), a tensor type gguf cannot dequantize (the type and
the tensor), a float32 training step larger than the memory (the estimate and the memory), another RoPE
scaling, an unknown pre-tokenizer. `load_gguf` checks first: a refused file leaves no cache behind, and a
cached load checks the memory again without opening the file."""
from __future__ import annotations

import dataclasses

import pytest
from gguf_families import FAMILIES, write_family

from app.engine.lm import loaded as loaded_module
from app.engine.lm.check import BYTES_PER_PARAMETER, UnsupportedModel, available_memory, check_gguf
from app.engine.lm.loaded import load_gguf

PLENTY = 1 << 40


def written(tmp_path, family="qwen2", **changes) -> tuple:
    family = dataclasses.replace(FAMILIES[family], **changes) if changes else FAMILIES[family]
    path = tmp_path / "model.gguf"
    state = write_family(path, family)
    return path, state


def test_a_supported_file_passes_with_its_figures(tmp_path):
    path, state = written(tmp_path)
    checked = check_gguf(path, memory_bytes=PLENTY)
    parameters = sum(values.size for values in state.values())  # tied: the embedding once
    assert (checked.architecture, checked.parameters) == ("qwen2", parameters)
    assert checked.training_bytes == parameters * BYTES_PER_PARAMETER == parameters * 4 * 5
    assert checked.available_bytes == PLENTY
    assert 0 < available_memory()


def test_another_architecture_is_named_with_the_supported_ones(tmp_path):
    path, _ = written(tmp_path, architecture="gemma2")
    with pytest.raises(UnsupportedModel, match=r"architecture 'gemma2' is not supported \(supported: llama, qwen2, "
                                               r"qwen3\)") as refused:
        check_gguf(path, memory_bytes=PLENTY)
    assert len(refused.value.reasons) == 1 and isinstance(refused.value, ValueError)


def test_a_tensor_gguf_cannot_dequantize_is_named_with_its_type(tmp_path):
    path = tmp_path / "model.gguf"
    write_family(path, "qwen2", int8_tensor="blk.1.ffn_up.weight")
    with pytest.raises(UnsupportedModel, match=r"tensor blk\.1\.ffn_up\.weight is I8, which gguf\.quants\.dequantize "
                                               r"cannot dequantize"):
        check_gguf(path, memory_bytes=PLENTY)


def test_a_model_too_large_for_the_memory_says_the_estimate_and_the_memory(tmp_path):
    path, state = written(tmp_path)
    parameters = sum(values.size for values in state.values())
    with pytest.raises(UnsupportedModel) as refused:
        check_gguf(path, memory_bytes=1 << 20)
    message = str(refused.value)
    assert f"{parameters:,} parameters × 4 bytes × 5" in message
    assert f"needs about {parameters * 20 / 2**30:.2f} GiB" in message and "0.00 GiB of memory is available" in message
    assert "policy, checkpoint (old policy and reference), gradients, AdamW exp_avg, AdamW exp_avg_sq" in message


def test_every_reason_is_given_at_once(tmp_path):
    path = tmp_path / "model.gguf"
    write_family(path, dataclasses.replace(FAMILIES["qwen2"], architecture="phi3", pre="deepseek-llm"),
                 int8_tensor="blk.0.ffn_up.weight")
    with pytest.raises(UnsupportedModel) as refused:
        check_gguf(path, memory_bytes=1)
    reasons = refused.value.reasons
    assert len(reasons) == 4
    assert ["architecture 'phi3'" in reasons[0], "pre-tokenizer 'deepseek-llm'" in reasons[1],
            "is I8" in reasons[2], "of memory is available" in reasons[3]] == [True] * 4


def test_another_rope_scaling_is_refused(tmp_path):
    path, _ = written(tmp_path, "llama", rope_scaling_type="yarn")
    with pytest.raises(UnsupportedModel, match=r"RoPE scaling 'yarn' \(llama\.rope\.scaling\.type\) is not implemented"):
        check_gguf(path, memory_bytes=PLENTY)


def test_load_gguf_refuses_before_it_converts_anything(tmp_path):
    path = tmp_path / "model.gguf"
    write_family(path, "qwen2", int8_tensor="blk.0.ffn_up.weight")
    cache = tmp_path / "cache"
    with pytest.raises(UnsupportedModel, match="I8"):
        load_gguf(path, cache)
    assert not cache.exists() or not any(cache.iterdir())


def test_a_cached_load_checks_the_memory_on_the_kept_count_without_opening_the_file(tmp_path, monkeypatch):
    path, state = written(tmp_path, "qwen3")
    first = load_gguf(path, tmp_path / "cache", memory_bytes=PLENTY)
    assert first.meta["parameters"] == sum(values.size for values in state.values())

    def no_reader(path):
        raise AssertionError("the GGUF file was opened again")

    monkeypatch.setattr(loaded_module, "GGUFReader", no_reader)
    again = load_gguf(path, tmp_path / "cache", memory_bytes=PLENTY)
    assert again.meta["text_cached"] and not again.meta["converted"]
    assert again.meta["parameters"] == first.meta["parameters"]
    with pytest.raises(UnsupportedModel, match="of memory is available"):
        load_gguf(path, tmp_path / "cache", memory_bytes=1)
