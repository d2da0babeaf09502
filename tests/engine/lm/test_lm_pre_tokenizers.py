"""The tokenizer's pre-tokenizers (app/engine/lm/text.py) split as the regexes of the tokenizer.json each family
ships do, on tricky strings; BOS follows `add_bos_token` (and llama.cpp's default); Llama 3's ignore_merges
and Qwen's NFC hold; an unknown pre-tokenizer is refused by name; the chat template gets `bos_token`.

Expected splits are written out by hand from the regexes (text.py's LLAMA3_SPLIT and QWEN2_SPLIT, GPT-2's
`'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`); the peer test
(peers/test_lm_families_peer.py) holds the ids to transformers' tokenizers on 420 strings."""
from __future__ import annotations

import dataclasses

import pytest
from gguf import GGUFReader
from gguf_families import FAMILIES, UNREACHABLE, write_family
from jinja2.exceptions import UndefinedError

from app.engine.lm.loaded import load_gguf
from app.engine.lm.text import PRE_TOKENIZERS, build_tokenizer, chat_prompt


def tokenizer_for(tmp_path_factory, pre: str, add_bos: bool | None = None, base: str = "llama"):
    family = dataclasses.replace(FAMILIES[base], pre=pre, add_bos=add_bos)
    path = tmp_path_factory.mktemp("pre") / f"{pre}.gguf"
    write_family(path, family)
    return build_tokenizer(GGUFReader(path))


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    return {pre: tokenizer_for(tmp_path_factory, pre) for pre in ("llama-bpe", "qwen2", "gpt2", "smollm")}


def pieces(tokenizer, text: str) -> list[str]:
    """The pre-tokens as slices of the text (the pre-tokenizer's offsets), not byte-level characters."""
    return [text[start:end] for _, (start, end) in tokenizer.pre_tokenizer.pre_tokenize_str(text)]


SPLITS = {
    # digits: Llama 3 in runs of at most three, never with the space; Qwen2 one by one; GPT-2 whole, with it
    "1234567 89": {"llama-bpe": ["123", "456", "7", " ", "89"],
                   "qwen2": ["1", "2", "3", "4", "5", "6", "7", " ", "8", "9"],
                   "gpt2": ["1234567", " 89"],
                   "smollm": ["1", "2", "3", "4", "5", "6", "7", " ", "8", "9"]},
    "it's 42!": {"llama-bpe": ["it", "'s", " ", "42", "!"], "qwen2": ["it", "'s", " ", "4", "2", "!"],
                 "gpt2": ["it", "'s", " 42", "!"], "smollm": ["it", "'s", " ", "4", "2", "!"]},
    # contractions: any case for Llama 3 and Qwen2 ((?i:...)), lower case only for GPT-2
    "I'M you'RE": {"llama-bpe": ["I", "'M", " you", "'RE"], "qwen2": ["I", "'M", " you", "'RE"],
                   "gpt2": ["I", "'", "M", " you", "'", "RE"], "smollm": ["I", "'", "M", " you", "'", "RE"]},
    # a letter run takes one leading non-letter, non-digit, non-newline character (Llama 3, Qwen2)
    "(hello)": {"llama-bpe": ["(hello", ")"], "qwen2": ["(hello", ")"], "gpt2": ["(", "hello", ")"],
                "smollm": ["(", "hello", ")"]},
    # CJK letters: one run, the space in front
    "日本語 東京": {pre: ["日本語", " 東京"] for pre in ("llama-bpe", "qwen2", "gpt2", "smollm")},
    "東京2026年": {"llama-bpe": ["東京", "202", "6", "年"], "qwen2": ["東京", "2", "0", "2", "6", "年"],
                 "gpt2": ["東京", "2026", "年"], "smollm": ["東京", "2", "0", "2", "6", "年"]},
    # a run of spaces leaves its last one to the next word
    "hello   world": {pre: ["hello", "  ", " world"] for pre in ("llama-bpe", "qwen2", "gpt2", "smollm")},
    # newlines: one piece for Llama 3 and Qwen2 (\s*[\r\n]+); GPT-2's \s+(?!\S) leaves the last to the next
    "x\n\n\ny": {"llama-bpe": ["x", "\n\n\n", "y"], "qwen2": ["x", "\n\n\n", "y"], "gpt2": ["x", "\n\n", "\n", "y"],
                 "smollm": ["x", "\n\n", "\n", "y"]},
    "x \n y": {"llama-bpe": ["x", " \n", " y"], "qwen2": ["x", " \n", " y"], "gpt2": ["x", " \n", " y"],
               "smollm": ["x", " \n", " y"]},
}


@pytest.mark.parametrize("text", list(SPLITS))
@pytest.mark.parametrize("pre", ["llama-bpe", "qwen2", "gpt2", "smollm"])
def test_each_pre_tokenizer_splits_as_its_regex(tokenizers, pre, text):
    assert pieces(tokenizers[pre], text) == SPLITS[text][pre]


def test_every_known_name_builds_and_another_is_refused_by_name(tmp_path_factory):
    assert {"smollm", "llama-bpe", "qwen2", "gpt2", "default"} <= set(PRE_TOKENIZERS)
    with pytest.raises(ValueError, match=r"pre-tokenizer 'deepseek-llm' is not implemented \(known: .*llama-bpe.*qwen2"):
        tokenizer_for(tmp_path_factory, "deepseek-llm")


def test_bos_follows_add_bos_token_and_llama_cpps_default(tmp_path_factory, tokenizers):
    bos = tokenizers["llama-bpe"].token_to_id("<|begin_of_text|>")
    assert tokenizers["llama-bpe"].encode("hi").ids[0] == bos  # the file's add_bos_token: true
    assert bos not in tokenizers["llama-bpe"].encode("hi", add_special_tokens=False).ids
    # no add_bos_token in the file: llama.cpp's default for the pre-tokenizer (true for llama-bpe only)
    assert tokenizer_for(tmp_path_factory, "llama-bpe", add_bos=None).encode("hi").ids[0] == bos
    assert bos not in tokenizer_for(tmp_path_factory, "llama-bpe", add_bos=False).encode("hi").ids
    qwen = tokenizer_for(tmp_path_factory, "qwen2", add_bos=None, base="qwen2")
    assert qwen.encode("hi").ids == [qwen.token_to_id("h"), qwen.token_to_id("i")]


def test_llama3_ignores_merges_for_a_pre_token_in_the_vocabulary(tokenizers):
    # "Ġquux" is in the vocabulary, and no merge builds it
    assert tokenizers["llama-bpe"].encode(" quux", add_special_tokens=False).tokens == [UNREACHABLE]
    assert tokenizers["qwen2"].encode(" quux").tokens == ["Ġ", "q", "u", "u", "x"]


def test_qwen2_normalizes_to_nfc_first(tokenizers):
    assert tokenizers["qwen2"].encode("cafe\u0301").ids == tokenizers["qwen2"].encode("caf\u00e9").ids
    assert tokenizers["llama-bpe"].encode("cafe\u0301").ids != tokenizers["llama-bpe"].encode("caf\u00e9").ids


@pytest.mark.parametrize("pre", ["llama-bpe", "qwen2"])
@pytest.mark.parametrize("text", ["", "plain ascii", "  two  spaces\t\ttabs\n\n", "ünïcödé ✓ 日本語 🙂 12345",
                                  "def f(x):\n    return x ** 2  # code", "\u200b\u00a0odd spaces"])
def test_any_nfc_text_round_trips_through_the_bytes(tokenizers, pre, text):
    assert tokenizers[pre].decode(tokenizers[pre].encode(text).ids) == text


def test_the_chat_template_gets_bos_token_and_chat_ids_add_no_second_bos(tmp_path_factory):
    path = tmp_path_factory.mktemp("chat") / "llama.gguf"
    write_family(path, "llama")
    loaded = load_gguf(path, tmp_path_factory.mktemp("cache"))
    messages = [{"role": "user", "content": "hello the world"}]
    prompt = loaded.chat_prompt(messages)
    assert prompt.startswith("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhello the world<|eot_id|>")
    assert prompt.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    with pytest.raises(UndefinedError, match="bos_token"):  # Llama 3's template needs the variable
        chat_prompt(loaded.chat_template, messages)
    ids = loaded.chat_ids(messages)
    assert ids.count(loaded.special_ids.bos) == 1 and ids[0] == loaded.special_ids.bos
