"""The base model's corpus: seeded, in the template's vocabulary, and mediocre by design.

An unformatted completion is the right number without the template: no answer can be parsed from
it, so it earns no accuracy (as the toy's `unformatted` choice)."""
from collections import Counter

import pytest

from app.kinds.tiny_lm.domain.arith_corpus import MIX, build_corpus
from app.kinds.tiny_lm.domain.arith_task import encode, rewards


def test_seeded_and_every_text_is_in_the_vocabulary():
    corpus = build_corpus(300, seed=1)
    assert corpus == build_corpus(300, seed=1) and corpus != build_corpus(300, seed=2)
    assert max(len(encode(e.text)) for e in corpus) <= 32  # the model's block size


@pytest.mark.parametrize("kind, accuracy, fmt, language", [
    ("correct", 1.0, 1.0, 1.0), ("mixed", 1.0, 1.0, 0.0), ("unformatted", 0.0, 0.0, 1.0), ("wrong", 0.0, 1.0, 1.0),
])
def test_each_kind_earns_the_rewards_its_name_says(kind, accuracy, fmt, language):
    examples = [e for e in build_corpus(400, seed=3) if e.kind == kind]
    assert examples
    for e in examples:
        parts = rewards(e.prompt, e.text[len(e.prompt.text):])
        assert (parts.accuracy, parts.format, parts.language) == (accuracy, fmt, language), e.text


def test_the_mix_follows_its_shares():
    counts = Counter(e.kind for e in build_corpus(4000, seed=5))
    for kind, share in MIX.items():
        assert abs(counts[kind] / 4000 - share) < 0.03
