r"""The real model (issue 33, app/kinds/smollm) against transformers' own loader of the same GGUF file.

transformers (5.10.4, the newest verl 0.9.1 allows) reads SmolLM2-135M-Instruct's GGUF file with its own
code: `AutoModelForCausalLM.from_pretrained(dir, gguf_file=name)` (its dequantization, its reverse
permutation of Q/K, its LlamaForCausalLM) and `AutoTokenizer.from_pretrained(dir, gguf_file=name)` (its
GGUF tokenizer conversion). The app's loader, module and tokenizer share none of that code.

Compared:
- logits, float32, on 20 prompts one at a time and on a left-padded batch of 8 (transformers given the
  mask and the positions of the real tokens), to 1e-4 relative to the prompt's logit scale
  (max |d| <= 1e-4 · max |logit|); the elementwise figure (|d| / max(1, |ours|), peers/cases.py's measure)
  is recorded for the summary and held under 1e-3: float32 rounding through 30 blocks in two orders of
  operations reaches ~1e-4 on single logits of ~20 (a float64 run cannot narrow it: transformers' RMSNorm
  and RoPE compute in float32 whatever the model's dtype); and greedy continuations of 24 tokens, token
  for token;
- token ids on 1,000 strings from a seeded RNG (ASCII, Unicode, code, runs of whitespace, control tokens
  inside text). One known difference, counted and checked, not hidden: the file names llama.cpp's
  `smollm` pre-tokenizer (`tokenizer.ggml.pre`; llama.cpp's converter gives that name when the HF
  tokenizer's output matches SmolLM's), which isolates every numeric character (`\p{N}`) before GPT-2's
  regex; transformers' GGUF conversion ignores the name and applies GPT-2's regex alone. The split
  changes the chunks around a numeric character, so only a string holding one can differ: a space
  before a non-ASCII numeric (" ½" is "Ġ" + "Â½" after the split, "ĠÂ" + "½" without it), and a run of
  whitespace before a digit (GPT-2's `\s+(?!\S)` leaves the run's last character to the next chunk;
  once the digit is split off, the run ends its piece and stays whole: "\n\n3" is "ĊĊ", "3", not "Ċ",
  "Ċ", "3"). ASCII digits alone tokenize the same (the vocabulary has no multi-digit token and no
  space+digit token). Every string must equal transformers' own tokenizer with that one split put in
  front, and a string that differs without it must hold a numeric;
- the chat template: the app's rendering equals `apply_chat_template(..., tokenize=False)`.
"""
from __future__ import annotations

import random
import time

import pytest
import torch

from peers.cases import AGREEMENT, relative_difference

transformers = pytest.importorskip("transformers")
from tokenizers import Tokenizer, pre_tokenizers  # noqa: E402  (after the skip)

from app.engine.lm.kv_cache import positions_from_mask  # noqa: E402
from app.engine.lm.text import chat_prompt  # noqa: E402
from app.kinds.smollm.engine import checkpoint  # noqa: E402

GGUF = checkpoint.installed_gguf()
pytestmark = pytest.mark.skipif(GGUF is None, reason=f"no SmolLM2 GGUF file: {checkpoint.INSTALL_HINT}")

FIGURES: dict[str, object] = {}


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    return checkpoint.load(tmp_path_factory.mktemp("smollm-data"))


@pytest.fixture(scope="module")
def theirs():
    assert GGUF is not None
    started = time.perf_counter()
    tokenizer = transformers.AutoTokenizer.from_pretrained(GGUF.parent, gguf_file=GGUF.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(GGUF.parent, gguf_file=GGUF.name,
                                                              dtype=torch.float32).eval()
    FIGURES["transformers load s"] = round(time.perf_counter() - started, 1)
    return model, tokenizer


CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "What is 17 + 25? Answer with the number only."}],
    [{"role": "system", "content": "You answer in one word."}, {"role": "user", "content": "Colour of the sky?"}],
    [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello! How can I help?"},
     {"role": "user", "content": "Write a haiku about rain."}],
    [{"role": "user", "content": "Übersetze: «Guten Morgen» — 日本語で？ 🙂"}],
    [{"role": "user", "content": "def f(x):\n    return x ** 2\n\nWhat does f(3) return?"}],
]

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Once upon a time, in a small village by the sea, there lived",
    "import torch\nfrom torch import nn\n\nclass Model(nn.Module):\n    def __init__(self):",
    "1, 2, 3, 5, 8, 13, 21, 34,",
    "Question: what is 12 * 12?\nAnswer:",
    "Les élèves ont étudié la Révolution française pendant",
    "   indented    text\twith\ttabs\n\n\nand newlines",
    "<|im_start|>user\nTell me a joke.<|im_end|>\n<|im_start|>assistant\n",
    "In 1969, Neil Armstrong became the first person to",
    "Photosynthesis converts light energy into",
    "SELECT name, COUNT(*) FROM users GROUP BY name HAVING",
    "ÄÖÜ äöü ß — 東京 — Москва — 🙂🚀",
    "Step 1: preheat the oven. Step 2:",
    "x",
]


def logits_agree(quantity: str, where: str, hf: torch.Tensor, mine: torch.Tensor) -> float:
    """max |d| / max |logit| (asserted <= 1e-4); the elementwise |d| / max(1, |ours|) recorded, <= 1e-3."""
    scale_relative = float((mine - hf).abs().max() / hf.abs().max())
    elementwise = relative_difference(hf, mine)
    AGREEMENT.record("transformers", quantity, elementwise, where)
    assert scale_relative <= 1e-4, f"{quantity} {where}: {scale_relative:.1e} of the logit scale"
    assert elementwise <= 1e-3, f"{quantity} {where}: {elementwise:.1e} elementwise"
    return scale_relative


def prompts(tokenizer: Tokenizer, template: str) -> list[list[int]]:
    texts = [chat_prompt(template, conversation) for conversation in CONVERSATIONS] + TEXTS
    assert len(texts) == 20
    return [tokenizer.encode(text).ids for text in texts]


def test_logits_equal_transformers_on_20_prompts(ours, theirs):
    model, _ = theirs
    worst = 0.0
    for index, ids in enumerate(prompts(ours.tokenizer, ours.chat_template)):
        batch = torch.tensor([ids])
        with torch.no_grad():
            mine, hf = ours.model(batch), model(batch).logits
        where = f"prompt {index} ({len(ids)} tokens)"
        worst = max(worst, logits_agree("SmolLM2 logits, one prompt (elementwise)", where, hf, mine))
    FIGURES["logits max |d| / max |logit|, 20 prompts"] = f"{worst:.1e}"


def test_logits_equal_transformers_on_a_left_padded_batch(ours, theirs):
    model, _ = theirs
    rows = prompts(ours.tokenizer, ours.chat_template)[:8]
    width = max(len(ids) for ids in rows)
    pad = ours.special_ids.pad
    ids = torch.tensor([[pad] * (width - len(row)) + row for row in rows])
    mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in rows])
    with torch.no_grad():
        mine = ours.model(ids, mask)
        hf = model(ids, attention_mask=mask, position_ids=positions_from_mask(mask)).logits
        alone = [ours.model(torch.tensor([row]))[0] for row in rows]
    worst = 0.0
    for index, row in enumerate(rows):
        real = slice(width - len(row), width)
        worst = max(worst, logits_agree("SmolLM2 logits, left-padded batch of 8 (elementwise)", f"row {index}",
                                        hf[index, real], mine[index, real]))
        # padding changes nothing but float32 rounding (another batch shape, another summation order)
        assert float((mine[index, real] - alone[index]).abs().max() / alone[index].abs().max()) <= 1e-4
    FIGURES["logits max |d| / max |logit|, left-padded batch of 8"] = f"{worst:.1e}"


def test_greedy_continuations_equal_transformers(ours, theirs):
    model, _ = theirs
    answers = []
    for conversation in CONVERSATIONS[:3]:
        ids = torch.tensor([ours.tokenizer.encode(chat_prompt(ours.chat_template, conversation)).ids])
        mine, _ = ours.model.generate(ids, torch.ones_like(ids), 24, 0.0, torch.Generator().manual_seed(0),
                                      eos_id=ours.special_ids.eos)
        with torch.no_grad():
            hf = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=24, do_sample=False,
                                eos_token_id=ours.special_ids.eos, pad_token_id=ours.special_ids.pad)[0, ids.shape[1]:]
        n = mine.shape[1]
        assert mine[0].tolist() == hf[:n].tolist()
        answers.append(ours.tokenizer.decode(mine[0].tolist()))
    FIGURES["greedy answers"] = answers


NUMERIC = "½²³¼¾٣٤७৩௫Ⅻⅷ①⑽"
UNICODE_POOLS = ["àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿßœ", "αβγδεζηθικλμνξοπρστυφχψω", "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
                 "日本語中文字漢字東京大阪北京上海", "한국어안녕하세요", "العربيةمرحبا", "हिन्दीनमस्ते", "🙂🚀🎉👍🏽❤️‍🔥🇫🇷",
                 "\u0301\u0308\u200d\u200b\ufeff", "€£¥©®™°±×÷§¶•…—–«»“”‘’", NUMERIC]
WORDS = ["the", "model", "reward", "group", "policy", "GRPO", "token", "answer", "is", "of", "and", "to", "Paris",
         "don't", "we'll", "it's", "3.14", "42", "2026", "1,000", "x²", "naïve", "café", "über"]
WHITESPACE = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\t\t  "]
CODE = ["def {0}({1}):\n    return {1} * 2\n", "for (int {0} = 0; {0} < n; {0}++) {{ sum += a[{0}]; }}",
        "if {0} == {1}:\n\tprint(f\"{{{0}}}\")", "const {0} = ({1}) => {{ return [{1}, ...rest]; }};",
        "SELECT {0}, {1} FROM t WHERE {0} > 10;", "<div class=\"{0}\">{1}</div>", "{0}: List[int] = [1, 2, 3]  # {1}",
        "    {0}  =  {1}  ;;  //  comment"]


def random_string(rng: random.Random, kind: int) -> str:
    if kind == 0:  # ASCII printable
        return "".join(rng.choice([chr(c) for c in range(32, 127)]) for _ in range(rng.randint(1, 60)))
    if kind == 1:  # Unicode
        return "".join(rng.choice(rng.choice(UNICODE_POOLS + [" ", "abc "])) for _ in range(rng.randint(1, 40)))
    if kind == 2:  # code
        names = ["x", "i", "value", "self", "_tmp", "α", "data2"]
        return rng.choice(CODE).format(rng.choice(names), rng.choice(names))
    if kind == 3:  # words with whitespace runs
        return "".join(rng.choice(WORDS) + rng.choice(WHITESPACE) for _ in range(rng.randint(1, 12)))
    # mixed, with control tokens inside the text
    parts = [rng.choice(WORDS), rng.choice(WHITESPACE), rng.choice(["<|im_start|>", "<|im_end|>", "<|endoftext|>", ""]),
             random_string(rng, rng.randint(0, 3))]
    rng.shuffle(parts)
    return "".join(parts)


def strings(count: int = 1000) -> list[str]:
    rng = random.Random(33)
    return [random_string(rng, index % 5) for index in range(count)]


def test_tokenization_equals_transformers_on_1000_strings(ours, theirs):
    _, tokenizer = theirs
    with_split = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    with_split.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                        with_split.pre_tokenizer])
    texts = strings()
    differing = []
    for text in texts:
        mine = ours.tokenizer.encode(text).ids
        assert mine == with_split.encode(text, add_special_tokens=False).ids, text
        assert ours.tokenizer.decode(mine, skip_special_tokens=False) == text
        if mine != tokenizer(text)["input_ids"]:
            differing.append(text)
            assert any(ch.isnumeric() for ch in text), text
    FIGURES["tokenizer: strings compared"] = len(texts)
    FIGURES["tokenizer: differ from transformers' GGUF conversion (each holds a numeric)"] = len(differing)
    FIGURES["tokenizer: differ from it with the smollm split in front"] = 0


@pytest.mark.parametrize("generation_prompt", [True, False])
def test_the_chat_template_renders_as_apply_chat_template(ours, theirs, generation_prompt):
    _, tokenizer = theirs
    for conversation in CONVERSATIONS:
        want = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=generation_prompt)
        assert chat_prompt(ours.chat_template, conversation, add_generation_prompt=generation_prompt) == want


def test_zz_report(ours):
    FIGURES["app load s (converted)" if ours.meta["converted"] else "app load s (cached)"] = round(ours.load_seconds, 1)
    for key, value in FIGURES.items():
        print(f"smollm peer: {key}: {value}")
