"""A language model's text side, from its GGUF file: the tokenizer, the chat template and the special ids.

The tokenizer is GPT-2's byte-level BPE (`tokenizer.ggml.model = "gpt2"`): every byte is first spelt as
one printable character (the space as `Ġ`), then the file's merges join them, in rank order, within
each pre-token. The pre-tokenizer is the one llama.cpp names in `tokenizer.ggml.pre` (`PRE_TOKENIZERS`
below, each split as the tokenizer.json its family ships on the Hugging Face Hub does):
- "smollm": every numeric character alone (`\\p{N}`), then GPT-2's regex, as that model's own
  tokenizer (Digits(individual_digits) then ByteLevel) does;
- "llama-bpe" (Llama 3): Llama 3's regex (numbers in runs of at most three digits, contractions in any
  case, a letter run taking one leading non-letter), and `ignore_merges`: a pre-token that is itself in
  the vocabulary is one token, merges or not (llama.cpp sets `ignore_merges` for this type; HF's
  tokenizer.json, written by transformers' TikTokenConverter, has `"ignore_merges": true`);
- "qwen2" (Qwen2, Qwen2.5, Qwen3): Llama 3's regex with every digit alone, after an NFC normalizer
  (transformers' Qwen2Converter, convert_slow_tokenizer.py, which its GGUF loader uses too);
- "gpt2", "gpt-2", "default": GPT-2's regex (`'s|'t|... | ?\\p{L}+| ?\\p{N}+|...`) alone.
Any other name is refused: splitting with the wrong regex would still run, and quietly mis-tokenize.
BOS is prepended when the file says so (`tokenizer.ggml.add_bos_token`; absent, llama.cpp's default for
the pre-tokenizer: true for "llama-bpe" only). Control tokens (token type 3: `<|im_start|>`, `<|eot_id|>`,
...) are special: matched whole in the text before the BPE, and dropped by
`decode(..., skip_special_tokens=True)`.

The chat template is a Jinja2 program the file ships (`tokenizer.chat_template`, ChatML for many);
it is rendered in Jinja2's immutable sandbox, as transformers' `apply_chat_template` does (trim_blocks,
lstrip_blocks, the loop-controls extension, `raise_exception`, and the special tokens' strings as
variables: `bos_token`, `eos_token`, which Llama 3's template writes). Model data, not a page: this module
is the one engine module the layer contract lets import jinja2 (pyproject.toml).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NoReturn

from gguf import GGUFReader
from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE

from app.engine.lm.gguf_file import field_value

CONTROL_TOKEN = 3  # llama.cpp's LLAMA_TOKEN_TYPE_CONTROL
USER_DEFINED_TOKEN = 4  # LLAMA_TOKEN_TYPE_USER_DEFINED

# Llama 3's split: transformers' TikTokenConverter default pattern (convert_slow_tokenizer.py), the
# pre_tokenizer of Meta-Llama-3's tokenizer.json; llama.cpp's LLAMA3 regex (llama-vocab.cpp) says the same
# with '[sS] for (?i:'s)
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen2's: the same with every digit alone (\p{N}, not \p{N}{1,3}): transformers' Qwen2Converter, the
# pre_tokenizer of Qwen2's tokenizer.json; llama.cpp's QWEN2 regex
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


@dataclass(frozen=True)
class PreTokenizer:
    """How one llama.cpp pre-tokenizer type splits text before the BPE."""
    split: str | None  # a regex whose matches are the pre-tokens; None: GPT-2's, ByteLevel's own
    digits_alone: bool = False  # every numeric character its own pre-token first (Digits(individual_digits))
    nfc: bool = False  # text NFC-normalized first
    ignore_merges: bool = False  # a pre-token in the vocabulary is one token, without the merges
    add_bos: bool = False  # llama.cpp's default when the file has no tokenizer.ggml.add_bos_token


# llama.cpp's names (`tokenizer.ggml.pre`: model data, not a kind's id) -> how each splits
PRE_TOKENIZERS = {
    "smollm": PreTokenizer(split=None, digits_alone=True),
    "llama-bpe": PreTokenizer(split=LLAMA3_SPLIT, ignore_merges=True, add_bos=True),
    "qwen2": PreTokenizer(split=QWEN2_SPLIT, nfc=True),
    "gpt2": PreTokenizer(split=None),
    "gpt-2": PreTokenizer(split=None),  # llama.cpp's converter's spelling of GPT-2's
    "default": PreTokenizer(split=None),
}


@dataclass(frozen=True)
class SpecialIds:
    eos: int  # where generation stops (a ChatML model: <|im_end|>)
    pad: int
    bos: int | None
    im_start: int | None  # ChatML's turn markers, None when the vocabulary has none
    im_end: int | None


def vocabulary_problem(reader: GGUFReader) -> str | None:
    """Why this stack cannot build the file's tokenizer (its vocabulary type, its pre-tokenizer), or None.
    Metadata only: check.py asks it before anything is loaded."""
    model = field_value(reader, "tokenizer.ggml.model")
    if model != "gpt2":
        return f"expected a byte-level BPE vocabulary (tokenizer.ggml.model = 'gpt2'), got {model!r}"
    pre = field_value(reader, "tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        return f"pre-tokenizer {pre!r} is not implemented (known: {', '.join(sorted(PRE_TOKENIZERS))})"
    return None


def adds_bos(reader: GGUFReader) -> bool:
    """Whether encoding prepends BOS: the file's `tokenizer.ggml.add_bos_token`, else llama.cpp's default
    for its pre-tokenizer (llama-vocab.cpp: true for Llama 3's)."""
    pre = PRE_TOKENIZERS[field_value(reader, "tokenizer.ggml.pre", "default")]
    return bool(field_value(reader, "tokenizer.ggml.add_bos_token", pre.add_bos))


def _pre_tokenizer(pre: PreTokenizer) -> pre_tokenizers.PreTokenizer:
    if pre.split is None:  # GPT-2's regex, inside ByteLevel (use_regex)
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
        if not pre.digits_alone:
            return byte_level
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    # a split of its own, then bytes to characters only (use_regex=False), as the families' tokenizer.json
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pre.split), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])


def build_tokenizer(reader: GGUFReader) -> Tokenizer:
    """The byte-level BPE tokenizer of the file's vocabulary, merges, token types and pre-tokenizer."""
    problem = vocabulary_problem(reader)
    if problem is not None:
        raise ValueError(problem)
    pre = PRE_TOKENIZERS[field_value(reader, "tokenizer.ggml.pre", "default")]
    tokens: list[str] = list(field_value(reader, "tokenizer.ggml.tokens"))
    merges = [tuple(merge.split(" ", 1)) for merge in field_value(reader, "tokenizer.ggml.merges")]
    types: list[int] = list(field_value(reader, "tokenizer.ggml.token_type", [1] * len(tokens)))

    vocab = {token: index for index, token in enumerate(tokens)}
    tokenizer = Tokenizer(BPE(vocab, merges, dropout=None, continuing_subword_prefix="", end_of_word_suffix="",
                              fuse_unk=False, ignore_merges=pre.ignore_merges))
    if pre.nfc:
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = _pre_tokenizer(pre)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False)
                                  for token, kind in zip(tokens, types, strict=True) if kind == CONTROL_TOKEN])
    tokenizer.add_tokens([AddedToken(token, special=False, normalized=False)
                          for token, kind in zip(tokens, types, strict=True) if kind == USER_DEFINED_TOKEN])
    bos = field_value(reader, "tokenizer.ggml.bos_token_id")
    if adds_bos(reader) and bos is not None:
        # BOS before the text, as Llama 3's tokenizer.json (TemplateProcessing "<|begin_of_text|> $A") does;
        # `encode(text, add_special_tokens=False)` leaves it out (a chat template that writes it itself)
        bos_token = tokens[int(bos)]
        tokenizer.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos_token} $A", pair=f"{bos_token} $A {bos_token}:1 $B:1",
                                          special_tokens=[(bos_token, int(bos))])])
    return tokenizer


def special_ids(reader: GGUFReader, tokenizer: Tokenizer) -> SpecialIds:
    eos = int(field_value(reader, "tokenizer.ggml.eos_token_id"))
    pad = field_value(reader, "tokenizer.ggml.padding_token_id")
    bos = field_value(reader, "tokenizer.ggml.bos_token_id")
    return SpecialIds(eos=eos, pad=eos if pad is None else int(pad), bos=None if bos is None else int(bos),
                      im_start=tokenizer.token_to_id("<|im_start|>"), im_end=tokenizer.token_to_id("<|im_end|>"))


def template_variables(tokenizer: Tokenizer, ids: SpecialIds) -> dict[str, str]:
    """The special tokens' strings a chat template may write (`{{ bos_token }}`, `{{ eos_token }}`), as
    transformers' apply_chat_template passes them (its `special_tokens_map`)."""
    variables = {"eos_token": tokenizer.id_to_token(ids.eos)}
    if ids.bos is not None:
        variables["bos_token"] = tokenizer.id_to_token(ids.bos)
    return {name: token for name, token in variables.items() if token is not None}


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
