"""A language model's text side, from its GGUF file: the tokenizer, the chat template and the special ids.

The tokenizer is GPT-2's byte-level BPE (`tokenizer.ggml.model = "gpt2"`): every byte is first spelt as
one printable character (the space as `Ġ`), then the file's merges join them, in rank order, within
each pre-token. The pre-tokenizer is the one llama.cpp names in `tokenizer.ggml.pre` (the table below):
for the 135M model's files every numeric character alone (`\\p{N}`), then GPT-2's regex
(`'s|'t|... | ?\\p{L}+| ?\\p{N}+|...`), as its own tokenizer (Digits(individual_digits) then ByteLevel)
does. No normalizer, no BOS added (the 135M model's `add_bos_token` is false). Control tokens (token type 3:
`<|im_start|>`, `<|im_end|>`, ...) are special: matched whole in the text before the BPE, and dropped by
`decode(..., skip_special_tokens=True)`.

The chat template is a Jinja2 program the file ships (`tokenizer.chat_template`, ChatML for many);
it is rendered in Jinja2's immutable sandbox, as transformers' `apply_chat_template` does (trim_blocks,
lstrip_blocks, the loop-controls extension, `raise_exception`). Model data, not a page: this module is
the one engine module the layer contract lets import jinja2 (pyproject.toml).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NoReturn

from gguf import GGUFReader
from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers, processors
from tokenizers.models import BPE

from app.engine.lm.gguf_file import field_value

CONTROL_TOKEN = 3  # llama.cpp's LLAMA_TOKEN_TYPE_CONTROL
USER_DEFINED_TOKEN = 4  # LLAMA_TOKEN_TYPE_USER_DEFINED
# the pre-tokenizers this reads: llama.cpp's name (model data, not a kind's id) -> digits split one by one
# before GPT-2's regex
_PRE_TOKENIZERS = {"smollm": True, "gpt2": False, "default": False}


@dataclass(frozen=True)
class SpecialIds:
    eos: int  # where generation stops (a ChatML model: <|im_end|>)
    pad: int
    bos: int | None
    im_start: int | None  # ChatML's turn markers, None when the vocabulary has none
    im_end: int | None


def build_tokenizer(reader: GGUFReader) -> Tokenizer:
    """The byte-level BPE tokenizer of the file's vocabulary, merges and token types."""
    model = field_value(reader, "tokenizer.ggml.model")
    if model != "gpt2":
        raise ValueError(f"expected a byte-level BPE vocabulary (tokenizer.ggml.model = 'gpt2'), got {model!r}")
    pre = field_value(reader, "tokenizer.ggml.pre", "default")
    if pre not in _PRE_TOKENIZERS:
        raise ValueError(f"pre-tokenizer {pre!r} is not implemented (known: {sorted(_PRE_TOKENIZERS)})")
    tokens: list[str] = list(field_value(reader, "tokenizer.ggml.tokens"))
    merges = [tuple(merge.split(" ", 1)) for merge in field_value(reader, "tokenizer.ggml.merges")]
    types: list[int] = list(field_value(reader, "tokenizer.ggml.token_type", [1] * len(tokens)))

    vocab = {token: index for index, token in enumerate(tokens)}
    tokenizer = Tokenizer(BPE(vocab, merges, dropout=None, continuing_subword_prefix="", end_of_word_suffix="",
                              fuse_unk=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if _PRE_TOKENIZERS[pre]:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    else:
        tokenizer.pre_tokenizer = byte_level
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False)
                                  for token, kind in zip(tokens, types, strict=True) if kind == CONTROL_TOKEN])
    tokenizer.add_tokens([AddedToken(token, special=False, normalized=False)
                          for token, kind in zip(tokens, types, strict=True) if kind == USER_DEFINED_TOKEN])
    return tokenizer


def special_ids(reader: GGUFReader, tokenizer: Tokenizer) -> SpecialIds:
    eos = int(field_value(reader, "tokenizer.ggml.eos_token_id"))
    pad = field_value(reader, "tokenizer.ggml.padding_token_id")
    bos = field_value(reader, "tokenizer.ggml.bos_token_id")
    return SpecialIds(eos=eos, pad=eos if pad is None else int(pad), bos=None if bos is None else int(bos),
                      im_start=tokenizer.token_to_id("<|im_start|>"), im_end=tokenizer.token_to_id("<|im_end|>"))


def chat_template(reader: GGUFReader) -> str:
    template = field_value(reader, "tokenizer.chat_template")
    if not template:
        raise ValueError("the GGUF file has no tokenizer.chat_template")
    return str(template)


def _raise_exception(message: str) -> NoReturn:
    raise TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def chat_prompt(template: str, messages: list[dict[str, Any]], add_generation_prompt: bool = True,
                **variables: Any) -> str:
    """The template rendered for these messages ([{"role": ..., "content": ...}, ...]), as a string to
    tokenize; `add_generation_prompt` ends it with the assistant's opening (`<|im_start|>assistant\\n`)."""
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    environment.filters["tojson"] = _tojson
    environment.globals["raise_exception"] = _raise_exception
    compiled = environment.from_string(template)
    return compiled.render(messages=messages, add_generation_prompt=add_generation_prompt, **variables)
