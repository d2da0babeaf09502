"""The real model's live step (app/kinds/smollm/engine/step.py, issue 33) against TRL's own GRPO code, at TRL's
defaults.

The step runs on the tiny GGUF (tests/kinds/smollm/smollm_tiny_gguf.py: the real model's architecture, loader,
tokenizer and chat template at Decoder.small's size), float32 as on the real model, with real sampled ragged
completions and rewards that differ, at the app's defaults: TRL's GRPOConfig optimiser (μ = num_iterations = 1,
so π = π_old at the recorded step) and log-probs from logits / the sampling temperature (0.8).

TRL scores the same tokens itself: the stand-in's `_generate` hands `GRPOTrainer._generate_and_score_completions`
the step's prompt and completion ids, and `_get_per_token_logps_and_entropies` is GRPOTrainer's own, on
transformers' LlamaForCausalLM read from the same GGUF file by transformers' GGUF loader, with the fused LM head
GRPOTrainer.__init__ adds (`add_fused_lm_head(model, temperature=self.temperature, ...)`, trl/trainer/
grpo_trainer.py ~line 1068: each logit times 1 / temperature, trl/kernels/chunked_logprob.py). TRL pads, masks,
scores the policy (and the reference when β > 0), computes the advantages and `_compute_loss`; its policy
log-probs keep their gradient, so `backward()` gives TRL's d loss / d log π. Compared, float32 tolerance (1e-5
relative, peers/cases.py `agree`): TRL's log π against the step's recorded log π (two Llama implementations, one
file), the advantages, the loss, and d loss / d log π of every token. With population std (the paper's), TRL has
only Bessel std: it is handed the step's advantages.

μ > 1 (the policy moved before the recorded step) cannot be scored by TRL here: the moved weights are not in the
result. That case hands TRL the step's recorded log-probs (peers/test_trl.py's stand-in), as the tiny LM's peer
tests do, and compares the loss and gradient with ratios ≠ 1 and the clip active.
"""
from __future__ import annotations

import copy
import importlib.util
import inspect
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")

from accelerate import Accelerator  # noqa: E402
from trl import GRPOConfig  # noqa: E402
from trl.trainer.grpo_trainer import GRPOTrainer  # noqa: E402
from trl.trainer.utils import add_fused_lm_head  # noqa: E402

from app.kinds.smollm.domain.tasks import RewardPart, Task  # noqa: E402
from app.kinds.smollm.engine import checkpoint  # noqa: E402
from app.kinds.smollm.engine.params import SmolParams  # noqa: E402
from app.kinds.smollm.engine.step import run_smol_step  # noqa: E402
from peers.cases import agree  # noqa: E402
from peers.test_trl import (  # noqa: E402
    TrainerStandIn,
    default_dtype,
    loss_types,
    trl_advantages_apply,
    trl_config,
    trl_step,
)

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
GROUP = {"group_size": 8, "max_new_tokens": 12, "seed": 3, "attention_block": 1}
CASES = {
    "trl": {"preset": "trl"},
    "trl-beta0.04": {"preset": "trl", "beta": 0.04},
    "deepseekmath": {"preset": "deepseekmath"},
    "dr_grpo": {"preset": "dr_grpo"},
}
# TRL's GRPOConfig fields -> the SmolParams fields that take their defaults
OPTIMISER_DEFAULTS = {"learning_rate": "learning_rate", "adam_beta1": "adam_beta1", "adam_beta2": "adam_beta2",
                      "adam_epsilon": "adam_epsilon", "weight_decay": "weight_decay",
                      "max_grad_norm": "max_grad_norm", "num_iterations": "inner_steps"}


@pytest.fixture(scope="module")
def gguf(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(path)
    return path


@pytest.fixture(scope="module")
def tiny(gguf, tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SMOLLM_GGUF", str(gguf))
        return checkpoint.load(tmp_path_factory.mktemp("smollm-data"))


@pytest.fixture(scope="module")
def theirs(gguf):
    """transformers' LlamaForCausalLM of the same file, by its own GGUF loader: the model TRL scores with."""
    return transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)


def with_fused_head(model, temperature: float, outputs: tuple[str, ...] = ("log_probs",)):
    """A copy of `model` patched as GRPOTrainer.__init__ patches its policy and reference (~line 1068)."""
    patched = copy.deepcopy(model)
    add_fused_lm_head(patched, temperature=temperature, outputs=outputs)
    return patched


class ScoringStandIn(TrainerStandIn):
    """peers/test_trl.py's stand-in, but TRL scores the tokens: `_generate` returns the step's prompt and
    completion ids (TRL pads them and builds the masks), and the log-prob calls run GRPOTrainer's own
    `_get_per_token_logps_and_entropies` on transformers' model. The policy's log-probs keep their gradient."""

    def __init__(self, args: GRPOConfig, accelerator: Accelerator, rewards: torch.Tensor, prompt: list[int],
                 completions: list[list[int]], model, ref_model, pad_id: int):
        nothing = torch.zeros(0)
        super().__init__(args, accelerator, rewards, nothing, nothing, nothing, [len(c) for c in completions])
        self.model = model.train()  # as in training: GRPOTrainer reads model.training for the mode
        self.ref_model = ref_model.eval() if self.beta else None
        self._tokenizer = SimpleNamespace(pad_token_id=pad_id)
        self._prompt, self._completions = prompt, completions
        self.scored: dict[str, torch.Tensor] = {}  # "policy", "old", "ref" -> what TRL scored

    def _generate(self, prompts):
        n = len(prompts)
        return ([list(self._prompt)] * n, [list(c) for c in self._completions], None, ["completion"] * n, None, {},
                None, None)

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        logps, entropies, aux = GRPOTrainer._get_per_token_logps_and_entropies(
            self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
        which = "ref" if model is self.ref_model else ("old" if self.scoring else "policy")
        if logps.requires_grad:
            logps.retain_grad()  # TRL's d loss / d log π, read after backward()
        self.scored[which] = logps
        return logps, entropies, aux


def trl_scores_and_steps(args: GRPOConfig, stand_in: ScoringStandIn, group_size: int,
                         advantages: torch.Tensor | None):
    """GRPOTrainer's generate-and-score, then its loss and backward, in float32 (peers/test_trl.py trl_step's
    order). Returns (scored inputs, loss)."""
    with default_dtype(torch.float32):
        scored = GRPOTrainer._generate_and_score_completions(stand_in, [{"prompt": "q"}] * group_size)
        if advantages is not None:
            scored["advantages"] = advantages
        stand_in.scoring = False
        loss = GRPOTrainer._compute_loss(stand_in, stand_in.model, dict(scored))
        loss.backward()
    return scored, loss


def step_config(tmp_path, params: SmolParams, group_size: int, loss_type: str) -> GRPOConfig:
    config = trl_config(tmp_path, params, group_size, loss_type)
    config.temperature = params.temperature  # what GRPOTrainer.__init__ hands add_fused_lm_head
    return config


@pytest.mark.parametrize("case", list(CASES))
def test_trl_scores_the_step_and_equals_its_loss_and_gradient(case, tiny, theirs, tmp_path):
    params = SmolParams(**GROUP, **CASES[case])
    assert params.inner_steps == 1  # TRL's default: π = π_old
    result = run_smol_step(params, tiny, tasks=TASKS)
    assert len(set(result.rewards)) > 1
    assert result.logprob_temperature == params.temperature != 1.0
    head = result.head
    mask = torch.tensor(result.mask)
    logp = torch.tensor(head["policy.token_logprobs"].values) * mask
    rewards = torch.tensor(result.rewards)
    advantages = torch.tensor([c.advantage for c in result.completions])
    own_advantages = trl_advantages_apply(params)
    prompt = result.ids[0][:result.prompt_length]
    completions = [list(c.token_ids) for c in result.completions]
    for loss_type in loss_types(params):
        config = step_config(tmp_path, params, len(completions), loss_type)
        assert (config.num_iterations, config.temperature) == (1, params.temperature)
        stand_in = ScoringStandIn(config, Accelerator(cpu=True), rewards, prompt, completions,
                                  with_fused_head(theirs, config.temperature, ("log_probs", "entropy")),
                                  with_fused_head(theirs, config.temperature), tiny.special_ids.pad)
        scored, loss = trl_scores_and_steps(config, stand_in, len(completions),
                                            None if own_advantages else advantages)
        width = scored["completion_mask"].shape[1]
        assert torch.equal(scored["completion_mask"].to(mask.dtype), mask[:, :width])
        where = f"smollm step {case} {loss_type}"
        trl_logp = stand_in.scored["policy"]
        agree("TRL", "smollm step log π (TRL's own scoring, T 0.8)", where, trl_logp.detach(), logp[:, :width],
              rtol=FLOAT32_RTOL)
        if params.beta:
            agree("TRL", "smollm step log π_ref (TRL's own scoring, T 0.8)", where, scored["ref_per_token_logps"],
                  torch.tensor(head["reference_policy.token_logprobs"].values)[:, :width] * mask[:, :width],
                  rtol=FLOAT32_RTOL)
        if own_advantages:
            agree("TRL", "smollm step advantages", where, scored["advantages"], advantages, rtol=FLOAT32_RTOL)
        agree("TRL", f"smollm step loss, TRL-scored ({loss_type})", where, loss, torch.tensor(result.loss),
              rtol=FLOAT32_RTOL)
        assert trl_logp.grad is not None
        agree("TRL", f"smollm step d loss / d logp, TRL-scored ({loss_type})", where, trl_logp.grad * mask[:, :width],
              torch.tensor(head["policy.token_logprobs"].grad)[:, :width] * mask[:, :width], rtol=FLOAT32_RTOL)


def test_a_moved_policy_equals_trls_loss_given_its_log_probs(tiny, tmp_path):
    """μ = 2 at lr 1e-3: the ratios leave 1 and the clip binds; TRL is handed the recorded log π, log π_old and
    log π_ref (it cannot score the moved policy) and computes the loss and d loss / d log π with num_iterations 2."""
    params = SmolParams(**GROUP, preset="trl", beta=0.04, inner_steps=2, learning_rate=1e-3)
    result = run_smol_step(params, tiny, tasks=TASKS)
    tokens = [t for c in result.completions for t in c.tokens]
    assert any(abs(t.ratio - 1) > 1e-3 for t in tokens) and any(t.clip_active for t in tokens)
    head, mask = result.head, torch.tensor(result.mask)
    logp, logp_old, logp_ref = (torch.tensor(head[f"{copy_}.token_logprobs"].values) * mask
                                for copy_ in ("policy", "old_policy", "reference_policy"))
    lengths = [c.length for c in result.completions]
    for loss_type in loss_types(params):
        config = trl_config(tmp_path, params, len(lengths), loss_type)
        assert config.num_iterations == 2
        scored, loss, grad = trl_step(config, torch.tensor(result.rewards), logp, logp_old, logp_ref, lengths,
                                      dtype=torch.float32)
        where = f"smollm step mu2 {loss_type}"
        agree("TRL", "smollm step advantages", where, scored["advantages"],
              torch.tensor([c.advantage for c in result.completions]), rtol=FLOAT32_RTOL)
        agree("TRL", f"smollm step loss, mu 2 ({loss_type})", where, loss, torch.tensor(result.loss),
              rtol=FLOAT32_RTOL)
        agree("TRL", f"smollm step d loss / d logp, mu 2 ({loss_type})", where, grad * mask,
              torch.tensor(head["policy.token_logprobs"].grad) * mask, rtol=FLOAT32_RTOL)


def test_the_step_defaults_are_grpo_configs(tmp_path):
    """SmolParams' optimiser defaults are GRPOConfig's (TRL's own numbers, read here, not re-typed), and the
    convention the step follows is TRL's source: the fused LM head at the config's temperature, Trainer's
    gradient clipping at max_grad_norm. The one default that differs is the sampling temperature: TRL's 1.0,
    the step's 0.8, at which the built-in prompts were chosen (app/kinds/smollm/domain/tasks.py); the log-probs
    follow whichever is set."""
    defaults, ours = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none"), SmolParams()
    for theirs_name, our_name in OPTIMISER_DEFAULTS.items():
        assert getattr(ours, our_name) == getattr(defaults, theirs_name), theirs_name
    assert (defaults.temperature, ours.temperature) == (1.0, 0.8)
    assert "0.8, not TRL's 1.0" in SmolParams.model_fields["temperature"].description
    init = inspect.getsource(GRPOTrainer.__init__)
    assert "add_fused_lm_head(" in init and "temperature=self.temperature" in init
    kernel = inspect.getsource(importlib.import_module("trl.kernels.chunked_logprob"))
    assert '"inv_t": 1 / temperature' in kernel
    training = inspect.getsource(transformers.Trainer)
    assert "if self.args.max_grad_norm > 0:\n" in training and "grad_norm = self._clip_grad_norm(model)" in training
    assert "clip_grad_norm_(model.parameters(), self.args.max_grad_norm)" in training
