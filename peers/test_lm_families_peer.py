r"""The LM stack's Llama and Qwen families (app/engine/lm) against transformers' own GGUF loader.

The files are the quick tests' tiny ones (tests/engine/lm/gguf_families.py: random F32 weights under
llama.cpp's names and metadata, a byte-level vocabulary with the family's pre-tokenizer, control tokens
and chat template), one per family: "llama" (Llama 3's shape, untied, Q/K rows permuted), "qwen2" (q/k/v
biases, tied), "qwen3" (per-head q/k RMSNorm, head width 128 where C / H = 16, tied) and "llama3_scaled"
(Llama 3.1's RoPE scaling, stored as the converter stores it: the `rope_freqs.weight` tensor).

transformers 5.10.4 reads each with its own code: `AutoModelForCausalLM.from_pretrained(dir, gguf_file=name)`
(its dequantization, its reverse permutation, its LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM),
`AutoTokenizer.from_pretrained(dir, gguf_file=name)` (its GGUF tokenizer conversion, integrations/ggml.py).
The app's loader, decoder and tokenizer share none of that code.

Compared, per family:
- logits, float32, on 10 prompts one at a time and on a left-padded batch (transformers given the mask
  and the real tokens' positions): max |d| <= 1e-4 · max |logit|;
- greedy continuations of 16 tokens (transformers' `generate`, the app's `Decoder.generate`), token for token;
- the chat template: the app's rendering (with `bos_token`, `eos_token`) equals `apply_chat_template`;
- token ids on 400 strings from a seeded RNG plus hand-picked tricky ones (digit runs, contractions in
  both cases, CJK, whitespace runs, NFD accents, control tokens inside text).

What transformers 5.10.4 does not do, measured here rather than hidden:
- RoPE scaling: its GGUF loader drops `rope_freqs.weight` (no parameter takes it) and maps no llama
  `rope.scaling.*` key, so its model of "llama3_scaled" runs unscaled RoPE (the figure is recorded, and
  must differ). The app's model is compared with transformers' LlamaForCausalLM of the same file given the
  scaling the tensor was computed from (`rope_parameters`, rope_type "llama3": transformers' own
  `_compute_llama3_parameters`).
- Llama 3's tokenizer: its GGUF conversion (GGUFLlamaConverter) ignores `tokenizer.ggml.pre` and splits with
  GPT-2's regex, without `ignore_merges` and without BOS (and sets eos_token to the BOS string). The app
  follows the tokenizer.json Meta ships (transformers' TikTokenConverter: Llama 3's regex, `ignore_merges`,
  BOS prepended). The app's ids equal transformers' converted tokenizer with that pre-tokenizer and
  `ignore_merges` put in (the regex taken from transformers' own TikTokenConverter), BOS first; the strings
  where the unmodified conversion differs are counted.
- Qwen: transformers' conversion (Qwen2Converter: Qwen2's regex, NFC) is what the app builds: ids equal as is.
"""
from __future__ import annotations

import importlib.util
import inspect
import json
import random
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from peers.cases import AGREEMENT, relative_difference

transformers = pytest.importorskip("transformers")
from tokenizers import Tokenizer  # noqa: E402  (after the skip)
from transformers.convert_slow_tokenizer import TikTokenConverter  # noqa: E402

from app.engine.lm.kv_cache import positions_from_mask  # noqa: E402
from app.engine.lm.loaded import LoadedModel, load_gguf  # noqa: E402

# the quick tests' family writer, by path: tests/ is no package (and a site-packages `tests` may shadow it)
_WRITER = Path(__file__).resolve().parents[1] / "tests" / "engine" / "lm" / "gguf_families.py"
_spec = importlib.util.spec_from_file_location("gguf_families", _WRITER)
assert _spec is not None and _spec.loader is not None
families = sys.modules.setdefault("gguf_families", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(families)  # registered first: its dataclasses look their module up

FAMILY_NAMES = ["llama", "qwen2", "qwen3", "llama3_scaled"]
LOGIT_SCALE_TOLERANCE = 1e-4
FIGURES: dict[str, dict[str, object]] = {name: {} for name in FAMILY_NAMES}

CONVERSATIONS = [
    [{"role": "user", "content": "hello the world"}],
    [{"role": "system", "content": "you can help"}, {"role": "user", "content": "What is 12345 + 678?"}],
    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello, you"},
     {"role": "user", "content": "and the world's 3 ing?"}],
    [{"role": "user", "content": "Übersetze «the» — 日本語で？ 🙂"}],
]
TEXTS = ["hello the world and you", "the 12345 of 678 is 9", "I'M sure you're RIGHT, it's 42.", "  indented\n\n\tx",
         "日本語の テキスト", "quux quux Quux", "<|im_start|>user\nhi<|im_end|>", "x"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("families")
    for name in FAMILY_NAMES:
        families.write_family(where / f"{name}.gguf", name)
    return where


def _their_model(folder: Path, name: str):
    config = None
    if families.FAMILIES[name].llama3_rope_scaling:
        config = transformers.AutoConfig.from_pretrained(folder, gguf_file=f"{name}.gguf")
        config.rope_parameters = {"rope_type": "llama3", "rope_theta": config.rope_parameters["rope_theta"],
                                  **families.LLAMA3_ROPE_SCALING}
    kwargs = {} if config is None else {"config": config}
    return transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=f"{name}.gguf", dtype=torch.float32,
                                                             **kwargs).eval()


@pytest.fixture(scope="module", params=FAMILY_NAMES)
def family(request, folder):
    """(name, the app's LoadedModel, transformers' model, transformers' tokenizer) of one family's file."""
    name = request.param
    ours = load_gguf(folder / f"{name}.gguf", Path(tempfile.mkdtemp(prefix=f"lm-{name}-")))
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=f"{name}.gguf")
    return name, ours, _their_model(folder, name), tokenizer


def prompts(ours: LoadedModel) -> list[list[int]]:
    ids = [ours.chat_ids(conversation) for conversation in CONVERSATIONS]
    ids += [ours.tokenizer.encode(text).ids for text in TEXTS]
    assert len(ids) == 12
    return ids


def logits_agree(name: str, where: str, hf: torch.Tensor, mine: torch.Tensor) -> float:
    scale_relative = float((mine - hf).abs().max() / hf.abs().max())
    AGREEMENT.record("transformers", f"{name} logits (elementwise)", relative_difference(hf, mine), where)
    assert scale_relative <= LOGIT_SCALE_TOLERANCE, f"{name} {where}: {scale_relative:.1e} of the logit scale"
    return scale_relative


def test_logits_equal_transformers_prompt_by_prompt(family):
    name, ours, model, _ = family
    worst = 0.0
    for index, ids in enumerate(prompts(ours)):
        batch = torch.tensor([ids])
        with torch.no_grad():
            worst = max(worst, logits_agree(name, f"prompt {index} ({len(ids)} tokens)", model(batch).logits,
                                            ours.model(batch)))
    FIGURES[name]["logits max |d| / max |logit|, 12 prompts"] = f"{worst:.1e}"


def test_logits_equal_transformers_on_a_left_padded_batch(family):
    name, ours, model, _ = family
    rows = prompts(ours)[:6]
    width = max(len(row) for row in rows)
    pad = ours.special_ids.pad
    ids = torch.tensor([[pad] * (width - len(row)) + row for row in rows])
    mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in rows])
    with torch.no_grad():
        mine = ours.model(ids, mask)
        hf = model(ids, attention_mask=mask, position_ids=positions_from_mask(mask)).logits
    worst = 0.0
    for index, row in enumerate(rows):
        real = slice(width - len(row), width)
        worst = max(worst, logits_agree(name, f"padded row {index}", hf[index, real], mine[index, real]))
    FIGURES[name]["logits max |d| / max |logit|, left-padded batch of 6"] = f"{worst:.1e}"


def test_greedy_continuations_equal_transformers(family):
    name, ours, model, _ = family
    eos, pad = ours.special_ids.eos, ours.special_ids.pad
    lengths = []
    for conversation in CONVERSATIONS[:3]:
        ids = torch.tensor([ours.chat_ids(conversation)])
        mine, _ = ours.model.generate(ids, torch.ones_like(ids), 16, 0.0, torch.Generator().manual_seed(0), eos_id=eos,
                                      pad_id=pad)
        with torch.no_grad():
            hf = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=16, do_sample=False,
                                eos_token_id=eos, pad_token_id=pad)[0, ids.shape[1]:]
        assert mine[0].tolist() == hf.tolist()
        lengths.append(len(hf))
    FIGURES[name]["greedy tokens equal (per prompt, of 16)"] = lengths


def test_transformers_gguf_loader_drops_the_llama3_rope_scaling(folder):
    """What transformers' GGUF loader does with the scaled file when not told the scaling: unscaled RoPE."""
    ours = load_gguf(folder / "llama3_scaled.gguf", Path(tempfile.mkdtemp(prefix="lm-scaled-")))
    as_loaded = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file="llama3_scaled.gguf",
                                                                  dtype=torch.float32).eval()
    assert as_loaded.config.rope_parameters.get("rope_type", "default") == "default"
    ids = torch.tensor([prompts(ours)[1]])
    with torch.no_grad():
        mine, hf = ours.model(ids), as_loaded(ids).logits
    difference = float((mine - hf).abs().max() / hf.abs().max())
    FIGURES["llama3_scaled"]["vs transformers' GGUF loader as is (no scaling): max |d| / max |logit|"] = \
        f"{difference:.1e}"
    assert difference > 1e-3


@pytest.mark.parametrize("generation_prompt", [True, False])
def test_the_chat_template_renders_as_apply_chat_template(family, generation_prompt):
    _, ours, _, tokenizer = family
    for conversation in CONVERSATIONS:
        want = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=generation_prompt)
        assert ours.chat_prompt(conversation, add_generation_prompt=generation_prompt) == want


TRICKY = ["12345", "1234567 89", " 42 and 007", "I'M", "you'RE we'Ll it's DON'T", "日本語中文字", "東京 2026年",
          "a  b   c    d", "\n\n\nx", "x \n y", "\t\t  tabs", "e\u0301 café", "(hello) [the]", "don't\n'tis",
          "<|eot_id|>x<|begin_of_text|>", " quux", "quux", "<|im_end|>\n", "½ ² ٣", "....!!!???"]
POOLS = ["hello", "the", "world", "12345", "678", "you", "'s", "'T", "quux", " ", "  ", "\n", "\n\n", "\t", "日本",
         "é", "e\u0301", "🙂", "ß", "<|im_start|>", "<|eot_id|>", "!", "..", "-", "x1y2"]


def strings(count: int = 400) -> list[str]:
    rng = random.Random(47)
    return TRICKY + ["".join(rng.choice(POOLS) for _ in range(rng.randint(1, 12))) for _ in range(count)]


def _with_llama3_split(tokenizer) -> Tokenizer:
    """transformers' converted tokenizer with the pre-tokenizer and ignore_merges of the tokenizer.json Meta
    ships for Llama 3 (written by transformers' TikTokenConverter: its default pattern, Split isolated, then
    ByteLevel without its regex; the BPE model's ignore_merges)."""
    pattern = inspect.signature(TikTokenConverter.__init__).parameters["pattern"].default
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    spec["model"]["ignore_merges"] = True
    return Tokenizer.from_str(json.dumps(spec))


def test_token_ids_equal_transformers(family):
    name, ours, _, tokenizer = family
    texts = strings()
    if families.FAMILIES[name].pre == "llama-bpe":
        llama3 = _with_llama3_split(tokenizer)
        bos = ours.special_ids.bos
        differ = 0
        for text in texts:
            mine = ours.tokenizer.encode(text).ids
            assert mine[0] == bos, text  # add_bos_token: the file says so
            assert mine[1:] == llama3.encode(text, add_special_tokens=False).ids, text
            differ += mine[1:] != tokenizer(text, add_special_tokens=False)["input_ids"]
        FIGURES[name]["tokenizer: strings equal to transformers' with Llama 3's split (BOS first)"] = len(texts)
        FIGURES[name]["tokenizer: strings where transformers' GGUF conversion (GPT-2 regex) differs"] = differ
    else:
        for text in texts:
            mine = ours.tokenizer.encode(text).ids
            assert mine == tokenizer(text)["input_ids"], text
        FIGURES[name]["tokenizer: strings equal to transformers' GGUF conversion"] = len(texts)
        # a chat prompt, tokenized as apply_chat_template(tokenize=True) does
        for conversation in CONVERSATIONS:
            want = tokenizer.apply_chat_template(conversation, tokenize=True, add_generation_prompt=True)
            want = want["input_ids"] if isinstance(want, dict) or hasattr(want, "keys") else want
            assert ours.chat_ids(conversation) == list(want)


def test_zz_report():
    for name, figures in FIGURES.items():
        for key, value in figures.items():
            print(f"lm families peer: {name}: {key}: {value}")
