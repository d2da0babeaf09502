"""The shipped base checkpoint (walkthroughs/models/tiny_lm_base.*): its bytes are the card's,
and it is mediocre in R1-Zero's ways, so GRPO has something to fix."""
import shutil
from pathlib import Path

import pytest

from app.kinds.tiny_lm.domain.arith_task import encode, make_prompts, rewards
from app.kinds.tiny_lm.engine.base_training import load_base
from app.kinds.tiny_lm.engine.lm_sampling import sample_group

CHECKPOINT = Path(__file__).resolve().parents[2] / "walkthroughs" / "models" / "tiny_lm_base.safetensors"


def test_small_and_loads_with_its_card():
    assert CHECKPOINT.stat().st_size < 2 * 1024 * 1024
    assert sum(p.numel() for p in load_base(CHECKPOINT).parameters()) == 105_728


def test_a_changed_file_is_refused(tmp_path):
    copy = tmp_path / CHECKPOINT.name
    shutil.copy(CHECKPOINT, copy)
    shutil.copy(CHECKPOINT.with_suffix(".json"), copy.with_suffix(".json"))
    data = bytearray(copy.read_bytes())
    data[-1] ^= 1
    copy.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256"):
        load_base(copy)


def test_the_base_is_partly_right_partly_unformatted_and_mixes_scripts():
    model = load_base(CHECKPOINT)
    parts = []
    for i, prompt in enumerate(make_prompts(32, seed=123)):
        group = sample_group(model, encode(prompt.text), 8, 24, seed=i)
        parts += [rewards(prompt, c) for c in group.completions]
    accuracy = sum(p.accuracy for p in parts) / len(parts)
    formatted = sum(p.format for p in parts) / len(parts)
    mixed = sum(p.language < 1 for p in parts) / len(parts)
    # measured at 32×8 samples: accuracy ≈ 0.43, format ≈ 0.77, mixed ≈ 0.21 (64 prompts)
    assert 0.2 < accuracy < 0.7 and 0.5 < formatted < 0.95 and 0.08 < mixed < 0.4, (accuracy, formatted, mixed)
