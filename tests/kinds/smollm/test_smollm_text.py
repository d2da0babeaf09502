"""The tokenizer and chat template built from the tiny GGUF file's vocabulary (smollm2_tiny_gguf.py)."""
from __future__ import annotations

import pytest
from gguf import GGUFReader
from jinja2.exceptions import SecurityError, TemplateError
from smollm_tiny_gguf import SMOLLM2_CHAT_TEMPLATE, write_tiny_gguf

from app.engine.lm.text import build_tokenizer, chat_prompt, chat_template, special_ids


@pytest.fixture(scope="module")
def reader(tmp_path_factory) -> GGUFReader:
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(path)
    return GGUFReader(path)


@pytest.fixture(scope="module")
def tokenizer(reader):
    return build_tokenizer(reader)


def test_merges_apply_in_rank_order_within_pre_tokens(tokenizer):
    assert tokenizer.encode("hello the world").tokens == ["h", "e", "l", "l", "o", "Ġthe", "Ġworld"]
    assert tokenizer.encode(" hello").tokens == ["Ġhello"]
    assert tokenizer.get_vocab_size() == 300


def test_digits_are_split_one_by_one_as_smollm_pre_tokenizes(tokenizer):
    # the vocabulary has "12" (a merge), but llama.cpp's smollm pre-tokenizer isolates every digit first
    assert tokenizer.token_to_id("12") is not None
    assert tokenizer.encode("12 is 12").tokens == ["1", "2", "Ġis", "Ġ", "1", "2"]


def test_control_tokens_are_matched_whole_and_skipped_in_decoding(tokenizer):
    encoding = tokenizer.encode("<|im_start|>user\nhi<|im_end|>")
    assert encoding.ids[0] == 1 and encoding.ids[-1] == 2
    assert tokenizer.decode(encoding.ids, skip_special_tokens=False) == "<|im_start|>user\nhi<|im_end|>"
    assert tokenizer.decode(encoding.ids) == "user\nhi"


@pytest.mark.parametrize("text", ["", "plain ascii", "  two  spaces\t\ttabs\n\n", "ünïcödé ✓ 日本語 🙂",
                                  "def f(x):\n    return x ** 2  # code", "\u200b\u00a0odd spaces"])
def test_any_text_round_trips_through_the_bytes(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text).ids) == text


def test_no_bos_is_added(tokenizer):
    assert tokenizer.encode("the").ids == [tokenizer.token_to_id("t"), tokenizer.token_to_id("h"),
                                           tokenizer.token_to_id("e")]


def test_special_ids(reader, tokenizer):
    ids = special_ids(reader, tokenizer)
    assert (ids.eos, ids.pad, ids.bos, ids.im_start, ids.im_end) == (2, 2, 1, 1, 2)


def test_the_chat_template_is_the_files_chatml(reader):
    template = chat_template(reader)
    assert template == SMOLLM2_CHAT_TEMPLATE
    prompt = chat_prompt(template, [{"role": "user", "content": "What is 2 + 3?"}])
    assert prompt == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                      "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n")
    own_system = chat_prompt(template, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                                        {"role": "assistant", "content": "Hello."}], add_generation_prompt=False)
    assert own_system == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                          "<|im_start|>assistant\nHello.<|im_end|>\n")


def test_the_template_runs_in_a_sandbox():
    with pytest.raises(SecurityError):
        chat_prompt("{{ messages.__class__.__mro__[1].__subclasses__() }}", [])
    with pytest.raises(TemplateError, match="no tools"):
        chat_prompt("{{ raise_exception('no tools') }}", [])
    assert chat_prompt("{% for m in messages %}{{ m | tojson }}{% break %}{% endfor %}",
                       [{"role": "user", "content": "é"}, {"role": "x", "content": "y"}]) == '{"role": "user", "content": "é"}'
