"""A BPE tokenizer trained in the test on a tiny corpus (the `tokenizers` library, no download),
wrapped as transformers' PreTrainedTokenizerFast with <pad> and <eos>: what the recorder peers feed
TRL's trainer and verl's DataProto."""
from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

CORPUS = ["ab ba cab\n", "bad dab\n", "a cab, a dab\n", "abba\n", "dad bad cab\n"] * 4


def bpe_tokenizer(corpus: list[str] = CORPUS, vocab_size: int = 24) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<eos>"],
                                                        show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
