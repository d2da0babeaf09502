"""The real model's live step (app/kinds/smollm/engine/step.py, issue 33) against TRL's own GRPO code.

The step runs on the tiny GGUF (tests/kinds/smollm/smollm_tiny_gguf.py: the real model's architecture, loader,
tokenizer and chat template at Decoder.small's size), float32 as on the real model, with real sampled ragged
completions and rewards that differ. Its recorded samples and log-probs (log π, log π_old, log π_ref, the
completion lengths, the rewards) go to TRL through the harness peers/test_trl.py and test_token_level.py use
(`trl_config`, `trl_step`: GRPOTrainer._generate_and_score_completions for the advantages, GRPOTrainer.
_compute_loss and its backward for the loss and d loss / d log π), in float32. Compared, float32 tolerance
(1e-5 relative, peers/cases.py `agree`): the advantages, the loss and d loss / d log π of every token.
With population std (the paper's), TRL has only Bessel std: it is handed the step's advantages.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

pytest.importorskip("trl")

from app.kinds.smollm.domain.tasks import RewardPart, Task  # noqa: E402
from app.kinds.smollm.engine import checkpoint  # noqa: E402
from app.kinds.smollm.engine.params import SmolParams  # noqa: E402
from app.kinds.smollm.engine.step import run_smol_step  # noqa: E402
from peers.cases import agree  # noqa: E402
from peers.test_trl import loss_types, trl_advantages_apply, trl_config, trl_step  # noqa: E402

# the fast tests' tiny GGUF writer, by path: tests/ is no package (and a site-packages `tests` may shadow it)
_WRITER = Path(__file__).resolve().parents[1] / "tests" / "kinds" / "smollm" / "smollm_tiny_gguf.py"
_spec = importlib.util.spec_from_file_location("smollm_tiny_gguf", _WRITER)
assert _spec is not None and _spec.loader is not None
_writer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_writer)
write_tiny_gguf = _writer.write_tiny_gguf

FLOAT32_RTOL = 1e-5
TASKS = (Task("peer", "Say hello.", "e", (
    RewardPart("accuracy", lambda text: float("e" in text), "1 when the reply holds an 'e'."),
    RewardPart("brevity", lambda text: 0.5 * (len(text) % 3 == 0), "0.5 when its length is a multiple of 3."))),)
CASES = {
    "trl": {"preset": "trl"},
    "trl-beta0.04": {"preset": "trl", "beta": 0.04},
    "deepseekmath": {"preset": "deepseekmath"},
    "dr_grpo": {"preset": "dr_grpo"},
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SMOLLM_GGUF", str(path))
        return checkpoint.load(tmp_path_factory.mktemp("smollm-data"))


@pytest.mark.parametrize("case", list(CASES))
def test_the_step_equals_trls_loss_and_gradient(case, tiny, tmp_path):
    params = SmolParams(group_size=8, max_new_tokens=12, seed=3, learning_rate=1e-3, attention_block=1,
                        **CASES[case])
    result = run_smol_step(params, tiny, tasks=TASKS)
    assert len(set(result.rewards)) > 1
    head = result.head
    logp = torch.tensor(head["policy.token_logprobs"].values)
    logp_old = torch.tensor(head["old_policy.token_logprobs"].values)
    logp_ref = torch.tensor(head["reference_policy.token_logprobs"].values)
    mask = torch.tensor(result.mask)
    logp, logp_old, logp_ref = logp * mask, logp_old * mask, logp_ref * mask  # TRL's padding reads 0 (masked)
    rewards = torch.tensor(result.rewards)
    lengths = [c.length for c in result.completions]
    advantages = torch.tensor([c.advantage for c in result.completions])
    own_advantages = trl_advantages_apply(params)
    for loss_type in loss_types(params):
        scored, loss, grad = trl_step(trl_config(tmp_path, params, len(lengths), loss_type), rewards, logp, logp_old,
                                      logp_ref, lengths, advantages=None if own_advantages else advantages,
                                      dtype=torch.float32)
        assert torch.equal(scored["completion_mask"].to(mask.dtype), mask)
        where = f"smollm step {case} {loss_type}"
        if own_advantages:
            agree("TRL", "smollm step advantages", where, scored["advantages"], advantages, rtol=FLOAT32_RTOL)
        agree("TRL", f"smollm step loss ({loss_type})", where, loss, torch.tensor(result.loss), rtol=FLOAT32_RTOL)
        agree("TRL", f"smollm step d loss / d logp ({loss_type})", where, grad * mask,
              torch.tensor(head["policy.token_logprobs"].grad) * mask, rtol=FLOAT32_RTOL)
