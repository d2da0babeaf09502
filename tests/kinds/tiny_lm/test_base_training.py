"""The base checkpoint's training: deterministic, masked padding, and it learns."""
import contextlib
from dataclasses import replace

import pytest
import torch

from app.kinds.tiny_lm.domain.arith_task import PAD, TOKEN_ID
from app.kinds.tiny_lm.engine.base_training import BaseRecipe, corpus_tensor, lm_loss, state_digest, train_base
from app.kinds.tiny_lm.engine.tiny_lm import init_tiny_lm

SMALL = BaseRecipe(corpus_size=200, batch_size=16)


def test_a_few_steps_are_deterministic():
    a, b = train_base(SMALL, steps=3), train_base(SMALL, steps=3)
    assert state_digest(a) == state_digest(b)
    assert state_digest(a) != state_digest(train_base(BaseRecipe(seed=1, corpus_size=200, batch_size=16), steps=3))


def test_padding_never_counts():
    model = init_tiny_lm(0)
    ids = corpus_tensor(SMALL, model.cfg.block_size)[:4]
    padded = torch.cat([ids, torch.full((4, 3), TOKEN_ID[PAD])], dim=1)
    torch.testing.assert_close(lm_loss(model, ids), lm_loss(model, padded), rtol=1e-13, atol=1e-13)


@contextlib.contextmanager
def torch_threads(n: int):
    """torch's intra-op threads set to `n` for the block (a checkpoint's float sums depend on them)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def test_loss_falls():
    losses = []
    train_base(SMALL, steps=40, progress=lambda _step, loss: losses.append(loss))
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5, losses


def test_the_command_writes_safetensors_and_a_card(tmp_path):
    import json
    import subprocess
    import sys

    from safetensors.torch import load_file

    out = tmp_path / "base.safetensors"
    subprocess.run([sys.executable, "-m", "app", "base-model", "--steps", "2", "--out", str(out)], check=True,
                   capture_output=True, timeout=120)
    card = json.loads(out.with_suffix(".json").read_text())
    assert card["recipe"]["steps"] == 2 and card["rebuild"] == "make base-model"
    weights = load_file(str(out))
    model = init_tiny_lm(0)
    model.load_state_dict({k: v.double() for k, v in weights.items()})
    with torch_threads(card["torch_threads"]):  # float sums are ordered by thread: as many as the command had
        trained = train_base(BaseRecipe(steps=2))
    # float32 on disk: the same weights as a fresh run, to float32's precision
    for (name, p), q in zip(trained.state_dict().items(), model.state_dict().values(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6, msg=name)


@pytest.mark.parametrize("task,layers,width", [("sums", 2, 64), ("student", 2, 48)])
def test_the_command_builds_the_running_sums_checkpoints_with_their_recipe(tmp_path, task, layers, width):
    """Issue 22: the sums base and the student are built by the same command from the sums recipe;
    their cards name the task, the model (29 tokens, 72 positions) and the threads they were built
    with; a fresh run of the recipe gives the same weights as the file."""
    import json
    import subprocess
    import sys

    from safetensors.torch import load_file

    from app.kinds.tiny_lm.engine.sums_base import STUDENT_MODEL, SUMS_MODEL, SUMS_RECIPE, train_sums_base

    out = tmp_path / f"{task}.safetensors"
    subprocess.run([sys.executable, "-m", "app", "base-model", "--task", task, "--steps", "2", "--out", str(out)],
                   check=True, capture_output=True, timeout=180)
    card = json.loads(out.with_suffix(".json").read_text())
    assert card["task"] == task and card["rebuild"] == f"make base-model BASE_TASK={task}"
    assert card["recipe"]["model"] == {"vocab_size": 29, "block_size": 72, "n_layer": layers, "n_embd": width,
                                       "n_head": 4}
    assert card["recipe"]["dtype"] == "float32" and card["recipe"]["schedule"] == "cosine"
    assert card["torch_threads"] >= 1
    cfg = SUMS_MODEL if task == "sums" else STUDENT_MODEL
    with torch_threads(card["torch_threads"]):  # the subprocess's count, whatever this process has set
        fresh = train_sums_base(replace(SUMS_RECIPE, steps=2), cfg=cfg)
    weights = load_file(str(out))
    for name, p in fresh.state_dict().items():
        torch.testing.assert_close(p.float(), weights[name], rtol=0, atol=1e-6, msg=name)
