"""The verl recorder (app/kinds/step_record/recorders/verl.py) on a real verl 0.9.1 DataProto, checked against
verl's own loss.

The batch is what verl's actor reads: 2 prompts x 4 responses (uids interleaved, as a shuffled batch
holds them), left-padded prompts, right-padded ragged responses, a response_mask with a 0 inside one
response (a tool's output), token_level_scores on each response's last token, and advantages from
verl's own `compute_grpo_outcome_advantage` (core_algos.py). The current log-probs differ from
old_log_probs so that ratios leave the clip band (and, with A < 0, pass the dual clip's c = 3);
ref_log_prob differs from both. A byte-level BPE tokenizer is trained here: nothing is downloaded.

Each case writes the record with `write_step_record(..., config=config_from_verl(ActorConfig, AlgoConfig))`,
parses it with the app, and compares `recompute(record)` with verl's functions called on the same float32
tensors as `ppo_loss` (workers/utils/losses.py) composes them: `compute_policy_loss_vanilla` / `_gspo` /
`_cispo` with each loss_agg_mode, plus `kl_loss_coef · agg_loss(kl_penalty(low_var_kl))`:
- the loss, against max(|verl|, scale): verl sums float32 terms that cancel (centred advantages), so its
  own rounding is ~1e-7 of the terms' size (scale = Σ|w·term|, the rule of checks.py); plain relative shown;
- ∂loss/∂log π per token (autograd through verl) against the app's `.grad`, relative to the size of the
  token's terms, w·(|A|·ρ + β·(e^Δ + 1)) (the KL's gradient β·w·(1 − e^Δ) cancels in float32 near Δ = 0);
- verl's pg_clipfrac (tokens where max(−Aρ, −A·clip(ρ)) takes the clipped branch: ρ > 1+ε_high with A > 0,
  ρ < 1−ε_low with A < 0) against the app's per-token clip flags (clip_low | clip_high), and
  pg_clipfrac_lower (the dual clip binds) against the app's ratios; both to 1e-6 relative, with a floor of
  one token's share (1/tokens, checks.py's floor for clip fractions);
- the KL term, agg_loss(kld), against Σ w·KL from the app's per-token KL and weights.
"""
from __future__ import annotations

import os
import pathlib
import sys
from collections import defaultdict

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest
import torch
from verl import DataProto
from verl.trainer.config import AlgoConfig
from verl.trainer.config.algorithm import RolloutCorrectionConfig
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_weights
from verl.workers.config import ActorConfig, PolicyLossConfig

from app.kinds.step_record.domain.parsing import parse_record
from app.kinds.step_record.engine.checks import checks
from app.kinds.step_record.engine.step import recompute
from app.kinds.step_record.recorders.verl import config_from_verl, write_step_record
from peers.local_tokenizer import CORPUS, bpe_tokenizer

RTOL = 1e-6
PROMPTS = ["ab ba", "cab"]
UIDS = np.array(["p0", "p1", "p0", "p1", "p1", "p0", "p0", "p1"], dtype=object)  # interleaved groups
LENGTHS = [8, 5, 3, 6, 7, 2, 8, 4]  # responses of width 8, right-padded
SCORES = [1.0, 0.0, 0.0, 1.0, 0.5, 0.25, 1.0, 0.0]
WIDTH, PROMPT_WIDTH, KL_COEF = 8, 5, 0.1
AGGS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
CLIP = {"vanilla": (0.2, 0.28), "gspo": (3e-3, 4e-3), "cispo": (1.0, 0.28)}  # cispo: no lower bound (low = 1)
CASES = [(mode, agg, kl, None) for mode in ("vanilla", "gspo") for agg in AGGS for kl in (False, True)]
CASES += [("cispo", "token-mean", True, None), ("vanilla", "token-mean", True, "2.0"),
          ("vanilla", "seq-mean-token-mean", False, "0.5_1.6")]  # rollout IS: token TIS, token IcePop
WORST: dict = defaultdict(lambda: (0.0, ""))


class _Summary:
    def pytest_terminal_summary(self, terminalreporter):
        if WORST:
            terminalreporter.section("verl recorder: recomputed from the record vs verl's own functions (max)")
            for (case, quantity), (rel, where) in sorted(WORST.items()):
                terminalreporter.write_line(f"{case:38s} {quantity:38s} {rel:8.1e}  ({where})")


@pytest.fixture(scope="module", autouse=True)
def _summary(request):
    if not request.config.pluginmanager.has_plugin("verl-recorder-summary"):
        request.config.pluginmanager.register(_Summary(), "verl-recorder-summary")


TOKENIZER = bpe_tokenizer(CORPUS)
PAD, EOS = TOKENIZER.pad_token_id, TOKENIZER.eos_token_id


def _batch(rollout_is: str | None) -> tuple[DataProto, torch.Tensor, torch.Tensor]:
    """The actor's DataProto, and the current policy's log-probs and entropies (float32, (8, 8))."""
    g = torch.Generator().manual_seed(23)
    size = len(UIDS)
    prompts = torch.full((size, PROMPT_WIDTH), PAD)
    responses = torch.full((size, WIDTH), PAD)
    attention = torch.zeros(size, PROMPT_WIDTH + WIDTH, dtype=torch.int64)
    for i, (uid, n) in enumerate(zip(UIDS, LENGTHS, strict=True)):
        ids = TOKENIZER(PROMPTS[int(uid[1])])["input_ids"]
        prompts[i, -len(ids):] = torch.tensor(ids)  # left padding
        attention[i, PROMPT_WIDTH - len(ids): PROMPT_WIDTH + n] = 1
        responses[i, :n] = torch.randint(2, len(TOKENIZER), (n,), generator=g)
        if n < WIDTH:
            responses[i, n - 1] = EOS  # a full-width response is truncated: no EOS
    response_mask = attention[:, PROMPT_WIDTH:].clone()
    response_mask[1, 2] = 0  # a tool's output inside a response: not in the loss
    scores = torch.zeros(size, WIDTH)
    scores[torch.arange(size), torch.tensor(LENGTHS) - 1] = torch.tensor(SCORES)
    advantages, returns = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=scores, response_mask=response_mask, index=UIDS, norm_adv_by_std_in_grpo=True)
    on = response_mask.bool()
    old = -(torch.rand(size, WIDTH, generator=g) * 2.9 + 0.1)
    logp = (old + 0.25 * torch.randn(size, WIDTH, generator=g)).clamp(max=-1e-3)
    a = advantages[:, 0]
    for i in torch.nonzero(a < 0)[:2, 0].tolist():  # ρ = e^1.3 > c = 3 with A < 0: the dual clip binds
        old[i, 0], logp[i, 0] = -2.0, -0.7
    ref = (logp + 0.3 * torch.randn(size, WIDTH, generator=g)).clamp(max=-1e-3)
    tensors = {"prompts": prompts, "responses": responses, "attention_mask": attention, "response_mask": response_mask,
               "old_log_probs": old * on, "ref_log_prob": ref * on, "token_level_scores": scores,
               "token_level_rewards": scores, "advantages": advantages, "returns": returns}
    if rollout_is is not None:
        rollout = (old - torch.rand(size, WIDTH, generator=g)).clamp(max=-1e-3) * on
        tensors["rollout_log_probs"] = rollout
        tensors["rollout_is_weights"], _ = compute_rollout_correction_weights(
            log_ratio=tensors["old_log_probs"] - rollout, response_mask=response_mask, rollout_is="token",
            rollout_is_threshold=rollout_is if "_" in rollout_is else float(rollout_is))
    entropy = torch.rand(size, WIDTH, generator=g) * 2 * on
    return DataProto.from_dict(tensors=tensors, non_tensors={"uid": UIDS}), logp * on, entropy


def _configs(mode: str, agg: str, kl: bool, rollout_is: str | None) -> tuple[ActorConfig, AlgoConfig]:
    low, high = CLIP[mode]
    actor = ActorConfig(strategy="fsdp", rollout_n=4, ppo_mini_batch_size=2, ppo_micro_batch_size_per_gpu=8,
                        clip_ratio=low, clip_ratio_low=low, clip_ratio_high=high, clip_ratio_c=3.0,
                        policy_loss=PolicyLossConfig(loss_mode=mode), loss_agg_mode=agg, use_kl_loss=kl,
                        kl_loss_coef=KL_COEF, kl_loss_type="low_var_kl")
    correction = None if rollout_is is None else RolloutCorrectionConfig(
        rollout_is="token", rollout_is_threshold=rollout_is if "_" in rollout_is else float(rollout_is))
    return actor, AlgoConfig(adv_estimator="grpo", norm_adv_by_std_in_grpo=True, rollout_correction=correction)


def _verl_loss(data: DataProto, logp: torch.Tensor, actor: ActorConfig) -> tuple[torch.Tensor, dict, torch.Tensor]:
    """verl's actor loss as ppo_loss composes it; returns (loss, metrics, ∂loss/∂log π)."""
    b, leaf = data.batch, logp.clone().requires_grad_(True)
    mask = b["response_mask"].bool()
    # what the FSDP engine and the trainer set before the loss: one rank, this mini-batch's tokens and rows
    actor.global_batch_info.update(dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=mask.shape[0],
                                   loss_scale_factor=None)
    fn = {"vanilla": core_algos.compute_policy_loss_vanilla, "gspo": core_algos.compute_policy_loss_gspo,
          "cispo": core_algos.compute_policy_loss_cispo}[actor.policy_loss.loss_mode]
    loss, metrics = fn(old_log_prob=b["old_log_probs"], log_prob=leaf, advantages=b["advantages"],
                       response_mask=mask, loss_agg_mode=actor.loss_agg_mode, config=actor,
                       rollout_is_weights=b.get("rollout_is_weights", None))
    metrics["actor/pg_loss"] = loss.item()
    if actor.use_kl_loss:
        kld = core_algos.kl_penalty(logprob=leaf, ref_logprob=b["ref_log_prob"], kl_penalty=actor.kl_loss_type)
        kl_loss = core_algos.agg_loss(loss_mat=kld, loss_mask=mask, loss_agg_mode=actor.loss_agg_mode,
                                      **actor.global_batch_info)
        loss = loss + kl_loss * actor.kl_loss_coef
        metrics["actor/kl_loss"] = kl_loss.item()
    loss.backward()
    return loss.detach(), metrics, leaf.grad


def _compare(case: str, quantity: str, verl: float, app: float, floor: float) -> None:
    diff, denominator = abs(app - verl), max(abs(verl), floor)
    rel = diff / denominator if diff else 0.0
    WORST[(case, quantity)] = max(WORST[(case, quantity)], (rel, f"verl {verl:.9g}, app {app:.9g}"))
    assert diff <= RTOL * denominator, f"{case} {quantity}: verl {verl!r}, app {app!r}"


@pytest.mark.parametrize(("mode", "agg", "kl", "rollout_is"), CASES,
                         ids=[f"{m}-{a}{'-kl' if k else ''}{f'-is{r}' if r else ''}" for m, a, k, r in CASES])
def test_recomputed_record_equals_verls_loss(tmp_path, mode, agg, kl, rollout_is):
    case = f"{mode} {agg}{' +kl' if kl else ''}{f' IS {rollout_is}' if rollout_is else ''}"
    data, logp, entropy = _batch(rollout_is)
    actor, algorithm = _configs(mode, agg, kl, rollout_is)
    loss, metrics, grad = _verl_loss(data, logp, actor)
    if rollout_is is not None:  # some weights truncated to 2 (TIS) or zeroed outside [0.5, 1.6] (IcePop)
        weights, on = data.batch["rollout_is_weights"], data.batch["response_mask"].bool()
        assert bool(((weights == 2.0) if "_" not in rollout_is else (weights == 0) & on).any())
    path = str(tmp_path / "step-7.grpo-step.json")
    write_step_record(data, TOKENIZER, path, step=7, model="tiny", config=config_from_verl(actor, algorithm),
                      log_probs=logp, entropy=entropy, metrics=metrics)
    record = parse_record(pathlib.Path(path).read_bytes(), path)
    result = recompute(record)
    # the page's own check of the logged metrics (verl's keys: actor/pg_loss + β·actor/kl_loss, pg_clipfrac)
    found = {c.key.split(" ")[0]: c for c in checks(record, result)}
    assert "loss" in found and all(c.ok for c in found.values()), found
    if mode == "vanilla":
        assert "clip_ratio/region_mean" in found
    order = [i for uid in dict.fromkeys(UIDS) for i in range(len(UIDS)) if UIDS[i] == uid]  # record's rows
    assert [len(g.completions) for g in record.groups] == [4, 4]
    tokens = 1.0 / record.token_count

    _compare(case, "loss (vs max(|verl|, scale))", loss.item(), result.loss, result.scale)
    WORST[(case, "loss, plain relative (shown)")] = max(WORST[(case, "loss, plain relative (shown)")], (
        abs(result.loss - loss.item()) / abs(loss.item()), f"verl {loss.item():.9g}, app {result.loss:.9g}"))
    masks = [c.mask for c in result.completions]
    on = sum(float(m.sum()) for m in masks)
    flags = sum(float(((c.clip_low | c.clip_high) * c.mask).sum()) for c in result.completions) / on
    if mode == "cispo":  # verl counts ρ != clamp(ρ) whatever A's sign; the app flags ρ > cap with A > 0
        cap = record.config.clip_epsilon_high
        flags = sum(float(((c.ratio > cap) * c.mask).sum()) for c in result.completions) / on
    _compare(case, "pg_clipfrac vs clip flags", metrics["actor/pg_clipfrac"], flags, tokens)
    assert metrics["actor/pg_clipfrac"] > 0, f"{case}: nothing clipped; the clip fraction was never tested"
    if mode == "vanilla":
        dual = sum(float(((c.advantage < 0) & (c.ratio > 3.0) & (c.mask > 0)).sum()) for c in result.completions) / on
        _compare(case, "pg_clipfrac_lower vs dual-clip ratios", metrics["actor/pg_clipfrac_lower"], dual, tokens)
        assert dual > 0
    if mode == "vanilla":  # the app's metric by TRL's name is a token mean too (at sequence level, per sequence)
        _compare(case, "pg_clipfrac vs clip_ratio/region_mean", metrics["actor/pg_clipfrac"],
                 result.metrics["clip_ratio/region_mean"], tokens)
    if kl:
        mine = sum(float((c.weight * c.kl).sum()) for c in result.completions)
        _compare(case, "kl_loss (agg_loss of low_var_kl)", metrics["actor/kl_loss"], mine, 0.0)
        if agg == "token-mean":
            _compare(case, "kl_loss vs metrics['kl']", metrics["actor/kl_loss"], result.metrics["kl"], 0.0)
    worst = 0.0
    for k, c in enumerate(result.completions):
        n, row = len(c.grad), order[k]
        delta = record.groups[c.group].completions[c.index].ref_logprobs - c.logp
        size = c.weight * (np.abs(c.advantage) * c.ratio * c.is_weight + (
            record.config.beta * (np.exp(delta) + 1)))
        verl_grad = grad[row, :n].double().numpy()
        assert bool((grad[row, n:] == 0).all())  # padding takes no gradient
        for t in range(n):
            _compare(case, "dloss/dlogpi (vs terms' size)", float(verl_grad[t]), float(c.grad[t]), float(size[t]))
            if verl_grad[t]:
                worst = max(worst, abs(c.grad[t] - verl_grad[t]) / abs(verl_grad[t]))
    WORST[(case, "dloss/dlogpi plain relative (shown)")] = (worst, "")


def test_record_holds_verls_batch(tmp_path):
    data, logp, entropy = _batch(None)
    actor, algorithm = _configs("vanilla", "token-mean", True, None)
    path = str(tmp_path / "step.json")
    write_step_record(data, TOKENIZER, path, step=3, model="tiny", config=config_from_verl(actor, algorithm),
                      log_probs=logp, entropy=entropy, metrics={"actor/pg_loss": 0.5, "actor/list": [1, 2]})
    record = parse_record(pathlib.Path(path).read_bytes())
    assert record.run.framework == "verl" and record.run.framework_version == "0.9.1" and record.run.step == 3
    assert record.metrics == {"actor/pg_loss": 0.5}  # lists (one value per mini-batch) are left out
    c = record.config
    assert (c.clip_epsilon, c.clip_epsilon_high, c.dual_clip, c.beta) == (0.2, 0.28, 3.0, KL_COEF)
    assert (c.kl_estimator, c.advantage_std, c.advantage_epsilon, c.max_length) == ("k3", "sample", 1e-6, WIDTH)
    assert record.reward_functions == ["score"] and [g.id for g in record.groups] == ["p0", "p1"]
    b, order = data.batch, [i for uid in ("p0", "p1") for i in range(8) if UIDS[i] == uid]
    result = recompute(record)
    for k, (gi, _, comp) in enumerate(record.completions()):
        row, n = order[k], LENGTHS[order[k]]
        assert record.groups[gi].prompt == PROMPTS[gi] and list(record.groups[gi].prompt_token_ids) == \
            TOKENIZER(PROMPTS[gi])["input_ids"]
        assert comp.token_ids.tolist() == b["responses"][row, :n].tolist()
        assert "".join(comp.tokens) == TOKENIZER.decode(comp.token_ids.tolist(), skip_special_tokens=False)
        assert comp.mask.tolist() == b["response_mask"][row, :n].tolist()
        assert comp.truncated == (n == WIDTH)
        assert comp.rewards == {"score": SCORES[row]} and comp.reward == SCORES[row]
        assert comp.advantage == float(b["advantages"][row, 0])  # verl's own, float32, exactly
        np.testing.assert_array_equal(comp.logprobs, logp[row, :n].double().numpy())
        np.testing.assert_array_equal(comp.old_logprobs, b["old_log_probs"][row, :n].double().numpy())
        np.testing.assert_array_equal(comp.entropy, entropy[row, :n].double().numpy())
        # the record's conventions recompute verl's advantages from the rewards (sample std, + 1e-6)
        assert result.advantages_from_rewards[k] == pytest.approx(comp.advantage, rel=1e-6, abs=1e-7)
    assert record.groups[0].completions[1].mask is not None and 0 in record.groups[1].completions[0].mask


def test_on_policy_without_log_probs(tmp_path):
    """No current log-probs given: π_θ = π_old (the first mini-batch), every ratio 1, nothing clipped."""
    data, _, _ = _batch(None)
    data.batch["entropys"] = torch.ones_like(data.batch["old_log_probs"])
    record = write_step_record(data, TOKENIZER, str(tmp_path / "r.json"), step=0, model="tiny",
                               config=config_from_verl(*_configs("vanilla", "token-mean", False, None)))
    result = recompute(parse_record(record))
    assert result.metrics["clip_ratio/region_mean"] == 0 and result.metrics["entropy"] == 1.0
    assert all(np.allclose(c.ratio[c.mask > 0], 1.0) for c in result.completions)


def test_configurations_the_record_cannot_hold_are_refused():
    actor, _ = _configs("vanilla", "token-mean", True, None)
    bad = {"policy_loss": {"loss_mode": "sapo"}, "loss_agg_mode": "token-sum", "entropy_coeff": 0.01,
           "use_kl_loss": True, "kl_loss_type": "k3+"}
    with pytest.raises(ValueError) as refused:
        config_from_verl(bad, {"use_kl_in_reward": True, "adv_estimator": "gae"})
    for words in ("sapo", "token-sum", "entropy_coeff", "k3+", "use_kl_in_reward", "gae"):
        assert words in str(refused.value)
    with pytest.raises(ValueError, match="cispo with clip_ratio_low < 1"):
        config_from_verl({"policy_loss": {"loss_mode": "cispo"}, "clip_ratio_low": 0.2})
    data, logp, _ = _batch("2.0")
    with pytest.raises(ValueError, match="rollout_is_weights"):  # weights in the batch, none named in config
        write_step_record(data, TOKENIZER, "unused.json", step=0, model="m", config=config_from_verl(actor))
    assert config_from_verl(actor)["beta"] == KL_COEF
    fixed = config_from_verl({"loss_scale_factor": 4096, "loss_agg_mode": "seq-mean-token-sum-norm"})
    assert fixed["max_length"] == 4096 and fixed["loss_aggregation"] == "token_sum_norm"


def test_the_recorder_needs_verl_only_when_used(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "verl", None)  # as if verl were not installed
    config_from_verl({})  # the mapping reads a dict: no verl needed
    with pytest.raises(ImportError, match="install verl 0.9.1"):
        write_step_record(None, None, str(tmp_path / "x.json"), step=0, model="m", config={})
