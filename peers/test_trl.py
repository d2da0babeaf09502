"""TRL 1.16.0's own GRPO code, called on the app's samples: advantages, loss, d loss / d log pi.

Nothing of TRL's math is re-written here. Two methods of `GRPOTrainer` are called unbound on a
stand-in object that carries only the attributes they read, set from a real `GRPOConfig` the way
`GRPOTrainer.__init__` sets them (trl/trainer/grpo_trainer.py, 1.16.0, ~lines 574-1098):

- `_generate_and_score_completions` (~line 2324): TRL's advantages, from the app's rewards. The
  stand-in's `_generate` returns one-token completions, `_calculate_rewards` the app's rewards,
  `_get_per_token_logps_and_entropies` the app's log pi_old (policy at sampling time) and log pi_ref.
  With num_iterations = mu > 1 TRL computes old log-probs itself (through the stub), as in training.
- `_compute_loss` (~line 3020): TRL's loss, its KL term and aggregation; `_get_per_token_logps_and_
  entropies` returns the app's log pi as a (G, 1) float64 leaf, so `backward()` gives TRL's
  d loss / d log pi_i, scatter-added by action into (1, 4) and compared with the app's `policy` grad.

Mapping (app -> TRL): advantage_std sample -> scale_rewards="group" (nanstd, Bessel; eps 1e-4 is
hard-coded), none -> "none"; clip_epsilon / clip_epsilon_high -> epsilon / epsilon_high; beta -> beta;
kl_bias_correction -> use_bias_correction_kl; loss_aggregation sample_mean -> loss_type "grpo",
token_mean -> "dapo" and "bnpo" (both: the token mean, bnpo's over the local batch; one process here, so the
same), token_sum_norm -> "dr_grpo" with max_completion_length = max_length. The 2026 conventions (issue 23):
importance_sampling_level -> importance_sampling_level (GSPO's "sequence": _compute_loss ~line 3086);
policy_loss cispo -> loss_type "cispo" (its epsilon_high is an absolute cap on rho, as the app's; TRL
aggregates it by the token mean, so only token_mean maps); is_correction / is_clip_min / is_clip_max ->
vllm_importance_sampling_correction, _mode, _clip_min, _clip_max, with the rollout engine's log-probs
returned by the stand-in's `_generate` as vLLM's would be (use_vllm: TRL computes the ratio in
_generate_and_score_completions ~lines 2660-2705 and multiplies the per-token loss by it in _compute_loss).
The toy has no rollout engine: its IS cases give TRL log pi_old as the sampling log-probs (weights 1).

What TRL cannot express, and what the tests do instead:
- population std, or sample std with an epsilon other than 1e-4: TRL's advantage code is not
  called; the app's advantages are fed to `_compute_loss` (the loss and gradient are still TRL's).
- dual clip, log-ratio and KL clamps: TRL has none (`args.delta` is a two-sided ratio cap, not the
  dual clip). Where the app sets one and it binds for some sample the loss is not compared (skip);
  where it is set but binds nowhere it changes nothing, and TRL must agree.
- KL estimators k1 / k2: TRL's KL term is k3 only; with beta > 0 the loss is not compared.
- kl_placement=reward: TRL has no KL in the reward. A reward function can subtract it, so TRL is
  given the app's penalised reward (`reward_used`) and beta = 0; advantages and loss are compared.
"""
from __future__ import annotations

import contextlib
import inspect
from collections import defaultdict, deque
from types import SimpleNamespace

import pytest
import torch
from accelerate import Accelerator
from trl import GRPOConfig
from trl.trainer.grpo_trainer import GRPOTrainer

from app.engine.grpo import objective as conv
from app.engine.grpo.params import Conventions
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.records import StepResult
from peers.cases import CASES, Case, agree, any_flag, app_policy_grad, column, run_case, scatter_by_action

FRAMEWORK = "TRL"
TRL_ADVANTAGE_EPS = 1e-4  # hard-coded in _generate_and_score_completions: (std_rewards + 1e-4)
LOSS_TYPES = {"sample_mean": ("grpo",), "token_mean": ("dapo", "bnpo"), "token_sum_norm": ("dr_grpo",)}


def loss_types(p: Conventions) -> tuple[str, ...]:
    """TRL's loss types for the app's conventions: by aggregation for the clipped surrogate; "cispo" for
    CISPO, whose aggregation is TRL's token mean over the batch (num_items_in_batch), so only token_mean."""
    if p.policy_loss == "cispo":
        return ("cispo",) if p.loss_aggregation == "token_mean" else ()
    return LOSS_TYPES[p.loss_aggregation]


def trl_config(tmp_path, params: Conventions, group_size: int, loss_type: str, num_iterations: int = 2) -> GRPOConfig:
    """The app's conventions as a GRPOConfig. importance_sampling_level is TRL's own; the IS correction is
    TRL's vLLM one (vllm_importance_sampling_*), which the stand-in runs as with vLLM (use_vllm) whenever it is
    given the rollout engine's log-probs."""
    kl_in_loss = params.kl_placement == "loss"
    is_on = params.is_correction != "none"
    return GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, report_to="none",
        per_device_train_batch_size=group_size, num_generations=group_size,
        num_iterations=getattr(params, "inner_steps", num_iterations),
        scale_rewards="none" if params.advantage_std == "none" else "group",
        epsilon=params.clip_epsilon, epsilon_high=params.clip_epsilon_high,
        beta=params.beta if kl_in_loss else 0.0,
        use_bias_correction_kl=params.kl_bias_correction,
        loss_type=loss_type, max_completion_length=params.max_length,
        importance_sampling_level=params.importance_sampling_level,
        vllm_importance_sampling_correction=is_on,
        **({"vllm_importance_sampling_mode": params.is_correction,
            "vllm_importance_sampling_clip_min": params.is_clip_min,
            "vllm_importance_sampling_clip_max": params.is_clip_max} if is_on else {}),
    )


class TrainerStandIn:
    """What `_generate_and_score_completions` and `_compute_loss` read, set as GRPOTrainer.__init__ sets it.

    The model is never run: the three log-prob calls return the app's recorded numbers."""

    def __init__(self, args: GRPOConfig, accelerator: Accelerator, rewards: torch.Tensor, logp: torch.Tensor,
                 logp_old: torch.Tensor, logp_ref: torch.Tensor, lengths: list[int],
                 logp_sampling: torch.Tensor | None = None):
        self.args, self.accelerator = args, accelerator
        self.model = SimpleNamespace(training=True, is_gradient_checkpointing=False)
        self.beta = args.beta
        self.ref_model = SimpleNamespace(training=False, is_gradient_checkpointing=False) if self.beta else None
        self.num_iterations = args.num_iterations
        self.epsilon_low = args.epsilon
        self.epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon
        self.max_completion_length = args.max_completion_length
        self.num_generations = args.num_generations
        self.pad_to_multiple_of = args.pad_to_multiple_of
        # the rollout engine's log-probs come with vLLM: given them, TRL's IS correction runs as with vLLM
        self.use_vllm = args.use_vllm or logp_sampling is not None
        self.vllm_importance_sampling_correction = args.vllm_importance_sampling_correction
        self.vllm_importance_sampling_mode = args.vllm_importance_sampling_mode
        self.vllm_importance_sampling_clip_max = args.vllm_importance_sampling_clip_max
        self.vllm_importance_sampling_clip_min = args.vllm_importance_sampling_clip_min
        self._logp_sampling = logp_sampling
        self.loss_type = args.loss_type
        self.multi_objective_aggregation = args.multi_objective_aggregation
        self.aux_loss_enabled = False  # the model has no router logits
        self.scale_rewards = args.scale_rewards
        self.importance_sampling_level = args.importance_sampling_level
        self.off_policy_mask_threshold = args.off_policy_mask_threshold
        self.mask_truncated_completions = args.mask_truncated_completions
        self.top_entropy_quantile = args.top_entropy_quantile
        self.entropy_coef, self.use_adaptive_entropy = args.entropy_coef, args.use_adaptive_entropy
        self._entropy_bonus_enabled = self.entropy_coef != 0.0 or self.use_adaptive_entropy
        self.reward_weights = torch.ones(1, dtype=torch.float32)  # one reward function
        self.reward_func_names = ["app_reward"]
        self.environment_factories, self.tools, self.environments = None, None, None
        self.current_gradient_accumulation_steps = args.gradient_accumulation_steps
        self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
        self.log_multimodal = args.log_multimodal
        size = args.generation_batch_size
        self._logs = {"images": deque(maxlen=size), "prompt": deque(maxlen=size), "completion": deque(maxlen=size),
                      "rewards": defaultdict(lambda: deque(maxlen=size)), "advantages": deque(maxlen=size),
                      "extra": defaultdict(lambda: deque(maxlen=size))}
        self._pending_extra_logs, self._pending_metrics = defaultdict(list), defaultdict(list)
        self._tokenizer = SimpleNamespace(pad_token_id=0)
        # the numbers to score: rewards (G,), log-probs (G, T) right-padded, completion lengths (<= T)
        self._rewards, self._lengths = rewards, lengths
        self._logp, self._logp_old, self._logp_ref = logp, logp_old, logp_ref
        self.scoring = True  # True inside _generate_and_score_completions (no grad), False in _compute_loss
        self.policy_logps: torch.Tensor | None = None

    def _generate(self, prompts):
        n = len(prompts)
        # the rollout engine's per-token log-probs, unpadded as vLLM returns them (TRL pads them with 0)
        sampling = (None if self._logp_sampling is None
                    else [self._logp_sampling[i, :k].tolist() for i, k in enumerate(self._lengths)])
        # prompt ids, completion ids (TRL pads them and builds the mask), tool mask, texts, sampling logps,
        # extra fields, images, tool images
        return [[1]] * n, [[2] * k for k in self._lengths], None, ["completion"] * n, sampling, {}, None, None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        return self._rewards.unsqueeze(1).clone()  # (G, number of reward functions)

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep,
                                           compute_entropy=False, **kwargs):
        if model is self.ref_model:
            return self._logp_ref.clone(), None, None
        if self.scoring:  # the policy as it sampled: pi_old
            return self._logp_old.clone(), None, None
        self.policy_logps = self._logp.clone().requires_grad_(True)
        entropies = torch.zeros_like(self._logp) if compute_entropy else None
        return self.policy_logps, entropies, None


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype):
    """TRL's `nanstd` computes Bessel's count / (count - 1) from integer tensors, which torch divides in
    its default dtype: float32 unless told otherwise. The app works in float64, so the TRL calls run with
    float64 as the default dtype (test_nanstd_bessel_factor_follows_the_default_dtype shows the float32 figure)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def trl_advantages_apply(params: GRPOParams) -> bool:
    return params.advantage_std == "none" or (params.advantage_std == "sample"
                                              and params.advantage_epsilon == TRL_ADVANTAGE_EPS)


def trl_loss_gaps(result: StepResult) -> list[str]:
    """Why TRL cannot compute this step's loss, if it cannot (empty: it can)."""
    p, gaps = result.params, []
    if any_flag(result, "dual_clip_hit"):
        gaps.append("the dual clip binds; TRL has none")
    if any_flag(result, "ratio_clamped"):
        gaps.append("the log-ratio clamp binds; TRL has none")
    if p.kl_placement == "loss" and p.beta > 0:
        if p.kl_estimator != "k3":
            gaps.append(f"kl_estimator={p.kl_estimator} with beta > 0; TRL's KL term is k3")
        if any_flag(result, "kl_log_ratio_clamped") or any_flag(result, "kl_clamped"):
            gaps.append("a KL clamp binds; TRL has none")
    return gaps


def trl_step(args: GRPOConfig, rewards, logp, logp_old, logp_ref, lengths, advantages=None,
             dtype: torch.dtype = torch.float64, logp_sampling=None):
    """TRL's generate-and-score, then its loss and backward. Returns (scored inputs, loss, d loss / d logp)."""
    # the Accelerator after the config: building TrainingArguments resets accelerate's shared state
    trainer = TrainerStandIn(args, Accelerator(cpu=True), rewards, logp, logp_old, logp_ref, lengths, logp_sampling)
    with default_dtype(dtype):
        scored = GRPOTrainer._generate_and_score_completions(trainer, [{"prompt": "q"}] * len(lengths))
        if advantages is not None:
            scored["advantages"] = advantages
        trainer.scoring = False
        loss = GRPOTrainer._compute_loss(trainer, trainer.model, dict(scored))
        loss.backward()
    return scored, loss, trainer.policy_logps.grad


def run_trl(tmp_path, result: StepResult, loss_type: str = "dapo", dtype: torch.dtype = torch.float64):
    """`trl_step` on the app's recorded step (one token per completion). With an IS correction TRL is
    given log pi_old as the rollout engine's log-probs: the toy's pi_old sampled its group itself."""
    params, size = result.params, len(result.samples)
    logp_old = column(result, "logp_old").unsqueeze(1)
    return trl_step(
        trl_config(tmp_path, params, size, loss_type),
        column(result, "reward_used"),  # = reward unless kl_placement=reward (then: a reward function's penalty)
        *(column(result, name).unsqueeze(1) for name in ("logp", "logp_old", "logp_ref")), [1] * size,
        # TRL cannot compute these advantages: the app's (module docstring)
        advantages=None if trl_advantages_apply(params) else column(result, "advantage"), dtype=dtype,
        logp_sampling=logp_old if params.is_correction != "none" else None)


def case_params(case: Case) -> GRPOParams:
    return GRPOParams(**case.params)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_advantages(case, tmp_path):
    """TRL's advantages (scale_rewards group / none, its nanstd and its 1e-4) equal the app's."""
    params = case_params(case)
    if not trl_advantages_apply(params):
        pytest.skip(f"advantage_std={params.advantage_std}, eps={params.advantage_epsilon:g}: TRL has Bessel std "
                    "with eps 1e-4, or none")
    result = run_case(case)
    scored, _, _ = run_trl(tmp_path, result)
    agree(FRAMEWORK, "advantages", case.id, scored["advantages"], column(result, "advantage"))
    # and the log-probs TRL scored with are the app's (the stub's plumbing, not a comparison of math)
    if params.inner_steps > 1:
        assert torch.equal(scored["old_per_token_logps"][:, 0], column(result, "logp_old"))


LOSS_CASES = [pytest.param(case, loss_type, id=f"{case.id}-{loss_type}")
              for case in CASES for loss_type in loss_types(case_params(case))]


@pytest.mark.parametrize(("case", "loss_type"), LOSS_CASES)
def test_loss_and_gradient(case, loss_type, tmp_path):
    """TRL's loss and d loss / d log pi(c) equal the app's, wherever TRL can express the step."""
    result = run_case(case)
    gaps = trl_loss_gaps(result)
    if gaps:
        pytest.skip("; ".join(gaps))
    _, loss, grad = run_trl(tmp_path, result, loss_type)
    agree(FRAMEWORK, f"loss ({loss_type})", case.id, loss, result.loss)
    agree(FRAMEWORK, f"d loss / d log pi ({loss_type})", case.id,
          scatter_by_action(grad, column(result, "action")), app_policy_grad(result))


def test_every_loss_type_and_feature_was_compared():
    """The spread reaches what it claims: each mapped loss type, beta > 0 with and without the
    bias correction, an extreme step without clamps, and the app's own advantages (population)."""
    compared = {c.id for c in CASES if not trl_loss_gaps(run_case(c))}
    for needed in ("trl-beta0.04", "trl-beta0.04-no-bias-correction", "std-population", "kl-reward-k3",
                   "agg-token-sum-norm-L7", "trl-sample-mean", "no-clamps-extreme", "trl-all-equal",
                   # the 2026 conventions: GSPO's sequence ratio, CISPO (TRL's loss_type cispo), the IS modes
                   "preset-gspo", "gspo-eps0.2", "trl-sequence-beta0.04", "preset-cispo", "cispo-cap1.1-beta0.04",
                   "cispo-cap1.1-one-of-eight", "trl-is-token_truncate", "trl-is-token_mask",
                   "trl-is-sequence_truncate", "trl-is-sequence_mask"):
        assert needed in compared, needed
    loss_cases = {case.id for case, _ in (p.values for p in LOSS_CASES)}
    assert {"preset-cispo", "cispo-cap1.1-beta0.04"} <= loss_cases  # loss_type cispo, token mean
    assert any(t == "bnpo" for _, t in (p.values for p in LOSS_CASES))  # TRL's bnpo: the local token mean
    # and a case whose dual clip binds is not (TRL has none)
    assert "verl-dual-clip-hit" not in compared


def test_nanstd_bessel_factor_follows_the_default_dtype(tmp_path):
    """With torch's default float32, TRL's Bessel factor 8/7 is rounded to float32: its float64
    advantages are then off by ~2e-8 relative. That is TRL's precision, not a convention."""
    result = run_case(next(c for c in CASES if c.id == "preset-trl"))
    scored, _, _ = run_trl(tmp_path, result, dtype=torch.float32)
    rel = float((scored["advantages"] - column(result, "advantage")).abs().max())  # |A| < 1.3 here
    assert 1e-9 < rel < 1e-7


def test_trl_preset_is_grpo_config_defaults(tmp_path):
    """The app's `trl` preset (app/engine/presets.py) is GRPOConfig's defaults and TRL's hard-coded eps."""
    defaults = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    preset = GRPOParams(preset="trl")
    assert preset.beta == defaults.beta
    assert preset.clip_epsilon == defaults.epsilon
    assert preset.clip_epsilon_high == (defaults.epsilon_high if defaults.epsilon_high is not None
                                        else defaults.epsilon)
    assert preset.kl_bias_correction == defaults.use_bias_correction_kl
    assert (preset.advantage_std, defaults.scale_rewards) == ("sample", "group")
    assert (preset.loss_aggregation, defaults.loss_type) == ("token_mean", "dapo")
    assert preset.advantage_epsilon == TRL_ADVANTAGE_EPS
    assert "(std_rewards + 1e-4)" in inspect.getsource(GRPOTrainer._generate_and_score_completions)
    # the 2026 conventions at GRPOConfig's defaults: token-level ratios, the clipped surrogate (dapo), and
    # the vLLM IS correction's bounds (its mode is "none" in the app: TRL corrects only with vLLM)
    assert preset.importance_sampling_level == defaults.importance_sampling_level == "token"
    assert preset.policy_loss == "clip" and defaults.loss_type != "cispo"
    assert preset.is_clip_min == defaults.vllm_importance_sampling_clip_min
    assert preset.is_clip_max == defaults.vllm_importance_sampling_clip_max
    assert preset.is_correction == "none"


def test_gspo_and_cispo_presets_are_trls(tmp_path):
    """`gspo`: TRL's documented GSPO setup (docs/source/paper_index.md: importance_sampling_level="sequence",
    loss_type="grpo", beta=0.0, epsilon=3e-4, epsilon_high=4e-4); `cispo`: loss_type="cispo" with the
    epsilon_high GRPOConfig recommends for it (5.0), as an absolute bound on rho in _compute_loss."""
    gspo, cispo = GRPOParams(preset="gspo"), GRPOParams(preset="cispo")
    assert (gspo.importance_sampling_level, loss_types(gspo), gspo.beta) == ("sequence", ("grpo",), 0.0)
    assert (gspo.clip_epsilon, gspo.clip_epsilon_high) == (3e-4, 4e-4)
    config = trl_config(tmp_path, gspo, 8, "grpo")
    assert (config.importance_sampling_level, config.epsilon, config.epsilon_high) == ("sequence", 3e-4, 4e-4)
    help_text = GRPOConfig.__dataclass_fields__["epsilon_high"].metadata["help"]
    assert "loss_type='cispo'" in help_text and "recommended value is `5.0`" in help_text
    assert (cispo.policy_loss, loss_types(cispo), cispo.clip_epsilon_high) == ("cispo", ("cispo",), 5.0)
    source = inspect.getsource(GRPOTrainer._compute_loss)
    assert "torch.clamp(coef_1, max=self.epsilon_high).detach()" in source  # an absolute cap, not 1 + eps
    assert "is_cispo_clipped = (coef_1 > self.epsilon_high) & (advantages > 0)" in source  # the app's clip_high


# --- the conventions functions on several tokens per completion -----------------------------------

APP_MODE = {"grpo": "sample_mean", "dapo": "token_mean", "bnpo": "token_mean", "dr_grpo": "token_sum_norm"}


def app_conventions_loss(logp, logp_old, logp_ref, advantages, mask, *, eps_low, eps_high, beta, bias_correction,
                         mode, max_length):
    """The app's conventions functions composed as ToyGRPO.forward composes them (app/engine/model.py),
    on (G, T) tensors: ratio, clipped surrogate, k3, optional x rho, aggregate, minus."""
    ratio = torch.exp(conv.clamp_log_ratio(logp - logp_old, None)[0])
    surrogate = conv.clipped_surrogate(ratio, advantages.unsqueeze(1), eps_low, eps_high, None)
    kl = conv.kl_estimate(logp, logp_ref, "k3").value
    if bias_correction:
        kl = kl * ratio
    return -conv.aggregate(surrogate.value - beta * kl, mask, mode, max_length)


@pytest.mark.parametrize("bias_correction", [True, False], ids=["bias-correction", "no-bias-correction"])
@pytest.mark.parametrize("loss_type", list(APP_MODE))
def test_conventions_on_ragged_completions(loss_type, bias_correction, tmp_path):
    """TRL's _compute_loss on completions of 1 to 7 tokens (TRL pads them and builds the mask) equals the
    app's conventions functions: where the aggregation modes differ, which one-token steps cannot show."""
    lengths, tokens, size = [1, 3, 7, 2, 5], 7, 5
    gen = torch.Generator().manual_seed(3)
    logp_old = -torch.rand(size, tokens, generator=gen, dtype=torch.float64) * 3 - 0.05
    logp = logp_old + torch.randn(size, tokens, generator=gen, dtype=torch.float64) * 0.4
    logp_ref = logp_old + torch.randn(size, tokens, generator=gen, dtype=torch.float64) * 0.5
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5], dtype=torch.float64)
    mask = (torch.arange(tokens).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).to(torch.float64)
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", per_device_train_batch_size=size,
                      num_generations=size, num_iterations=2, epsilon=0.2, epsilon_high=0.28, beta=0.04,
                      use_bias_correction_kl=bias_correction, loss_type=loss_type, max_completion_length=9)
    scored, loss, grad = trl_step(args, rewards, logp, logp_old, logp_ref, lengths)
    assert torch.equal(scored["completion_mask"].to(torch.float64), mask)
    advantages = conv.group_advantages(rewards, "sample", TRL_ADVANTAGE_EPS)
    agree(FRAMEWORK, "conventions.group_advantages (synthetic)", "G=5", scored["advantages"], advantages)
    ours_logp = logp.clone().requires_grad_(True)
    ours = app_conventions_loss(ours_logp, logp_old, logp_ref, advantages, mask, eps_low=0.2, eps_high=0.28,
                                beta=0.04, bias_correction=bias_correction, mode=APP_MODE[loss_type], max_length=9)
    ours.backward()
    where = f"{loss_type}, {'with' if bias_correction else 'without'} bias correction, 1..7 tokens"
    agree(FRAMEWORK, f"conventions loss (synthetic, {loss_type})", where, loss, ours)
    agree(FRAMEWORK, f"conventions d loss / d logp (synthetic, {loss_type})", where, grad, ours_logp.grad)
