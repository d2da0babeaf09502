"""One recorded GRPO step: the history that moved the policy, then the shown update.

Showing a GRPO step with mu = 1 and no earlier update would be dull: rho = 1
exactly, clipping never bites and D = 0. So, as in DeepSeekMath Algorithm 1,
the policy first runs `iteration` earlier iterations (each re-freezes the old
policy, samples a group from it and makes `inner_steps` updates), then
`inner_step` updates of the current iteration. The reference is the base
checkpoint. The shown step is the next update's forward and backward pass:
every node's output and d(loss)/d(output) are recorded; the update itself is
not applied.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from app.engine.grpo.gradient_parts import gradient_parts
from app.engine.grpo.head import DTYPE
from app.engine.grpo.params import Conventions
from app.engine.grpo.token_step import NO_SAMPLING_LOGPS
from app.engine.runtime.compute import cached_computation
from app.engine.runtime.recorder import as_python, capture, node_record, parameter_grads
from app.engine.runtime.training import SGD
from app.kinds.toy.domain.toy_task import TOY_PROMPTS
from app.kinds.toy.engine.checkpoints import base_state
from app.kinds.toy.engine.model import ToyConfig, ToyGRPO
from app.kinds.toy.engine.node_map import MODULE_NODES, NO_GRAD_REASON, STATEMENT_NODES
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.records import RecordedStep, StepResult
from app.kinds.toy.engine.rewards import accuracy_reward


def _sample(model: ToyGRPO, x: torch.Tensor, group_size: int, gen: torch.Generator) -> torch.Tensor:
    # Sample on the CPU with the run's own generator: never the global RNG,
    # and the same numbers whatever the device.
    with torch.no_grad():
        probs = model.old_policy(x).exp()[0].cpu()  # (C,)
    return torch.multinomial(probs, group_size, replacement=True, generator=gen).to(x.device)  # (G,)


class TrainingDiverged(ValueError):
    """The history's updates blew up (NaN/inf): the parameters ask for too big a step."""


def _update(model: ToyGRPO, optimizer: SGD, x, actions, rewards, where: str) -> None:
    optimizer.descend(model(x, actions, rewards)["loss"])
    # A big learning rate with a big beta makes the k3 term's exp() explode;
    # refuse clearly instead of sampling from NaN probabilities.
    if not all(torch.isfinite(p).all() for p in model.policy.parameters()):
        raise TrainingDiverged(f"the policy diverged (non-finite weights) at {where}; "
                               "lower learning_rate or beta")


def _freeze_old(model: ToyGRPO) -> None:
    model.old_policy.load_state_dict(model.policy.state_dict())


def _record(model: ToyGRPO, x, actions, rewards) -> tuple[dict, dict[str, torch.Tensor]]:
    """Forward + backward with every module's output kept and its grad retained."""
    modules = {name: module for name, module in model.named_modules() if name in MODULE_NODES}
    with capture(modules) as outputs:
        x = x.clone().requires_grad_(True)
        model.policy.zero_grad(set_to_none=True)
        result = model(x, actions, rewards)
        for t in (result["per_sample"], result["loss"]):
            t.retain_grad()
        result["loss"].backward()
    outputs["input"] = x
    outputs["sub@ToyGRPO#0"] = result["per_sample"]
    outputs["output"] = result["loss"]
    for node_id, module_name in STATEMENT_NODES.items():
        outputs[node_id] = outputs[module_name]
    return result, outputs


def replay(params: GRPOParams, device: str = "cpu"):
    """The model, prompt, group and rewards just before the shown update (Algorithm 1's history
    under the request's conventions; step_clip_epsilon and step_beta play no part in it: see
    shown_model). Deterministic in (params, device)."""
    cfg = ToyConfig(conventions=params.conventions())
    prompt = TOY_PROMPTS[params.prompt]
    gen = torch.Generator().manual_seed(params.seed)
    model = ToyGRPO(cfg).to(dtype=DTYPE)
    base = base_state(cfg.n_features, cfg.n_choices, DTYPE)
    for copy in (model.policy, model.old_policy, model.reference_policy):
        copy.load_state_dict({k: v.clone() for k, v in base.items()}, strict=False)
    model.to(device)
    x = torch.tensor([prompt.features], dtype=DTYPE, device=device)  # (1, F)
    optimizer = SGD(model.policy, params.learning_rate)

    for it in range(params.iteration):
        _freeze_old(model)
        actions = _sample(model, x, params.group_size, gen)
        rewards = accuracy_reward(actions, prompt)
        for m in range(params.inner_steps):
            _update(model, optimizer, x, actions, rewards, f"iteration {it}, update {m}")

    _freeze_old(model)
    actions = _sample(model, x, params.group_size, gen)
    rewards = (torch.tensor(params.rewards, dtype=DTYPE, device=device) if params.rewards is not None
               else accuracy_reward(actions, prompt))
    for m in range(params.inner_step):
        _update(model, optimizer, x, actions, rewards, f"iteration {params.iteration}, update {m}")
    return model, prompt, x, actions, rewards


def with_conventions(model: ToyGRPO, conventions: Conventions) -> ToyGRPO:
    """A ToyGRPO with `conventions` holding `model`'s exact policy, old policy and reference (copies of
    their state dicts): the same group re-scored under other conventions."""
    param = next(model.policy.parameters())
    other = ToyGRPO(ToyConfig(conventions=conventions)).to(dtype=param.dtype).to(param.device)
    for name in ("policy", "old_policy", "reference_policy"):
        getattr(other, name).load_state_dict(getattr(model, name).state_dict())
    return other


def shown_model(params: GRPOParams, model: ToyGRPO) -> ToyGRPO:
    """The replayed model as the shown update scores it: with step_clip_epsilon / step_beta (the figure's
    controls) in place of the history's ε and β, so the group, π_old, π_ref and every ratio stay the
    history's and only the shown update's objective changes. `model` itself without either."""
    shown = params.shown_conventions()
    return model if shown == model.cfg.conventions else with_conventions(model, shown)


# One unit ~ a G=8 result (~32 KB as Python lists); G=4096 weighs 65 units (~4.5 MB).
@cached_computation(maxsize=512, weight=lambda r: 1 + r.params.group_size // 64)
def run_grpo_step(params: GRPOParams, device: str = "cpu") -> StepResult:
    """Deterministic for (params, device): safe to cache, safe to call from many threads."""
    model, prompt, x, actions, rewards = replay(params, device)
    return step_result(params, device, prompt, record_grpo_step(shown_model(params, model), x, actions, rewards))


def step_result(params: GRPOParams, device: str, prompt, recorded: RecordedStep, **extra_history) -> StepResult:
    """A recorded update with the history that led to it (DeepSeekMath Algorithm 1)."""
    history = {
        "iterations_before": params.iteration,
        "updates_per_iteration": params.inner_steps,
        "updates_in_current_iteration": params.inner_step,
        "policy_updates_so_far": params.iteration * params.inner_steps + params.inner_step,
        "old_policy": f"frozen at the start of iteration {params.iteration} (0-based)",
        "reference_policy": "the base checkpoint (the policy before any update)",
        "reward_rule": "override from the request" if params.rewards is not None
        else f"accuracy: 1 if the choice is {prompt.correct}, else 0",
        **extra_history,
    }
    if params.is_correction != "none":  # the toy samples from pi_old itself: no rollout engine to correct for
        history["is_correction"] = NO_SAMPLING_LOGPS.format(mode=params.is_correction)
    return StepResult(params, device, prompt, recorded.samples, recorded.objective, recorded.loss,
                      recorded.nodes, recorded.parameter_grads, history, shown_conventions=recorded.conventions)


CISPO_RATIO = ("cispo: the capped ratio min(rho, eps_high) is a constant weight (stop-gradient), so no gradient "
               "flows back through rho; the gradient reaches log pi directly")
KL_IN_REWARD = "in the reward: beta x this KL of pi_old is subtracted from r before the advantages (a constant)"


def _logp_gradients(model: ToyGRPO, x, actions, rewards) -> dict[str, torch.Tensor]:
    """∂loss/∂log π_θ(o_i) per sample and its two parts (surrogate, KL), by autograd. On a fresh
    forward pass of the same model: autograd.grad would add to the recorded pass's retained .grad."""
    out = model(x.detach(), actions, rewards)
    logp = out["logp"]
    (total,) = torch.autograd.grad(out["loss"], logp, retain_graph=True)
    surrogate, kl = gradient_parts(out["loss_parts"], logp)
    return {"grad_logp": total.detach(), "grad_surrogate": surrogate, "grad_kl": kl}


def record_grpo_step(model: ToyGRPO, x, actions, rewards) -> RecordedStep:
    """One forward + backward of the GRPO loss with every node's value and grad kept."""
    result, outputs = _record(model, x, actions, rewards)
    if not torch.isfinite(result["loss"]):
        raise TrainingDiverged("the shown step's loss is not finite; lower learning_rate or beta")
    c = model.cfg.conventions
    nodes = {node_id: node_record(node_id, t, NO_GRAD_REASON) for node_id, t in outputs.items()}
    if c.kl_placement == "reward":
        nodes["divergence"] = replace(nodes["divergence"], no_grad_reason=KL_IN_REWARD)
    ratio_grad = outputs["ratio"].grad
    if ratio_grad is None:  # cispo without KL x rho: rho reaches the loss only as a stopped weight
        ratio_grad = torch.zeros_like(result["ratio"])
        for node_id in ("ratio", "python@ratio#0"):
            nodes[node_id] = replace(nodes[node_id], no_grad_reason=CISPO_RATIO)
    surrogate, kl = result["surrogate_flags"], result["kl_flags"]
    ratio = result["ratio"].detach()
    ratio_clamped = (torch.zeros_like(ratio, dtype=torch.bool) if c.log_ratio_clamp is None
                     else (result["logp"] - result["logp_old"]).detach().abs() > c.log_ratio_clamp)
    kl_used = result["divergence"] if c.kl_placement == "reward" else result["kl_loss_term"]
    columns = {
        "action": actions, "reward": rewards, "logp": result["logp"], "logp_old": result["logp_old"],
        "logp_ref": result["logp_ref"], "reward_used": result["reward_used"],
        "advantage": result["advantages"], "ratio": ratio,
        "clipped": result["surrogate"], "divergence": result["divergence"], "kl_used": kl_used,
        "kl_rho_factor": ratio if c.kl_bias_correction else None,
        "objective": result["per_sample"], "weight": result["weights"],
        "clip_active": surrogate.clip_active, "dual_clip_hit": surrogate.dual_clip_hit,
        "ratio_clamped": ratio_clamped, "kl_log_ratio_clamped": kl.log_ratio_clamped,
        "kl_clamped": kl.kl_clamped, "ratio_grad": ratio_grad,
    }
    columns.update(_logp_gradients(model, x, actions, rewards))
    size = len(actions)
    as_lists = {k: [None] * size if v is None else as_python(v) for k, v in columns.items()}
    samples = [dict(zip(as_lists, row, strict=True)) for row in zip(*as_lists.values(), strict=True)]
    # + 0.0 turns an IEEE −0.0 (the loss of an all-zero-advantage group) into 0.0 for display.
    return RecordedStep(samples, float(result["objective"].detach()) + 0.0, float(result["loss"].detach()) + 0.0,
                        nodes, parameter_grads(model.policy), c)
