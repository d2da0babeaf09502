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

from dataclasses import dataclass, field

import torch

from .compute import cached_computation
from .model import ToyConfig, ToyGRPO
from .params import GRPOParams
from .prompts import TOY_PROMPTS, ToyPrompt, base_state

DTYPE = torch.float64  # tiny tensors: exact-enough numbers matter more than speed

# Snapshot node id -> where its tensor comes from. A `Python` node is its
# module's single statement, so it carries the module's output.
MODULE_NODES = (
    "policy", "policy.logits", "policy.log_probabilities",
    "old_policy", "old_policy.logits", "old_policy.log_probabilities",
    "reference_policy", "reference_policy.logits", "reference_policy.log_probabilities",
    "advantages", "ratio", "clipped", "divergence",
)
STATEMENT_NODES = {"python@ratio#0": "ratio", "python@clipped#0": "clipped"}
RUNNABLE_NODE_IDS = frozenset(MODULE_NODES) | set(STATEMENT_NODES) | {"input", "sub@ToyGRPO#0", "output"}
# What each node must be for this model to run it: same ids with other ops is another model.
RUNNABLE_NODE_OPS = {
    **{n: "Module" for n in ("policy", "old_policy", "reference_policy", "advantages", "ratio", "clipped", "divergence")},
    **{f"{m}.logits": "Linear" for m in ("policy", "old_policy", "reference_policy")},
    **{f"{m}.log_probabilities": "LogSoftmax" for m in ("policy", "old_policy", "reference_policy")},
    **{n: "Python" for n in STATEMENT_NODES},
    "input": "Input", "sub@ToyGRPO#0": "torch.sub", "output": "Output",
}

NO_GRAD_REASON = {
    "old_policy": "frozen: the old policy only supplies pi_old",
    "reference_policy": "frozen: the reference only supplies pi_ref",
    "advantages": "rewards are constants: no gradient flows into the advantages",
}


@dataclass(frozen=True)
class NodeRecord:
    shape: tuple[int, ...] | None
    dtype: str | None
    values: list | float | None
    grad: list | float | None
    no_grad_reason: str | None = None
    # Set when the node takes no part in the computation shown (e.g. the clip
    # under an SFT stage): no numbers are invented for it.
    inactive_reason: str | None = None

    @classmethod
    def inactive(cls, reason: str) -> NodeRecord:
        return cls(None, None, None, None, None, reason)


@dataclass(frozen=True)
class StepResult:
    params: GRPOParams
    device: str
    prompt: ToyPrompt
    samples: list[dict]
    objective: float
    loss: float
    nodes: dict[str, NodeRecord]
    parameter_grads: dict[str, dict]
    history: dict = field(default_factory=dict)
    kind: str = "grpo"  # or "sft" / "rejection_sampling" for a process stage's step


def accuracy_reward(actions: torch.Tensor, prompt: ToyPrompt) -> torch.Tensor:
    """Rule-based reward, as in R1-Zero's accuracy reward: 1 for the correct choice."""
    return (actions == prompt.correct).to(DTYPE)


def _sample(model: ToyGRPO, x: torch.Tensor, group_size: int, gen: torch.Generator) -> torch.Tensor:
    # Sample on the CPU with the run's own generator: never the global RNG,
    # and the same numbers whatever the device.
    with torch.no_grad():
        probs = model.old_policy(x).exp()[0].cpu()  # (C,)
    return torch.multinomial(probs, group_size, replacement=True, generator=gen).to(x.device)  # (G,)


class TrainingDiverged(ValueError):
    """The history's updates blew up (NaN/inf): the parameters ask for too big a step."""


def _update(model: ToyGRPO, x, actions, rewards, lr: float, where: str) -> None:
    model.policy.zero_grad(set_to_none=True)
    model(x, actions, rewards)["loss"].backward()
    with torch.no_grad():
        for param in model.policy.parameters():
            param -= lr * param.grad
        # A big learning rate with a big beta makes the k3 term's exp() explode;
        # refuse clearly instead of sampling from NaN probabilities.
        if not all(torch.isfinite(p).all() for p in model.policy.parameters()):
            raise TrainingDiverged(f"the policy diverged (non-finite weights) at {where}; "
                                   "lower learning_rate or beta")


def _freeze_old(model: ToyGRPO) -> None:
    model.old_policy.load_state_dict(model.policy.state_dict())


def _as_python(t: torch.Tensor):
    return t.detach().cpu().tolist()


def _record(model: ToyGRPO, x, actions, rewards) -> tuple[dict, dict[str, torch.Tensor]]:
    """Forward + backward with every module's output kept and its grad retained."""
    outputs: dict[str, torch.Tensor] = {}
    handles = []
    for name, module in model.named_modules():
        if name in MODULE_NODES:
            def hook(_m, _inp, out, name=name):
                if out.requires_grad:
                    out.retain_grad()
                outputs[name] = out
            handles.append(module.register_forward_hook(hook))
    try:
        x = x.clone().requires_grad_(True)
        model.policy.zero_grad(set_to_none=True)
        result = model(x, actions, rewards)
        for t in (result["per_sample"], result["loss"]):
            t.retain_grad()
        result["loss"].backward()
    finally:
        for h in handles:
            h.remove()
    outputs["input"] = x
    outputs["sub@ToyGRPO#0"] = result["per_sample"]
    outputs["output"] = result["loss"]
    for node_id, module_name in STATEMENT_NODES.items():
        outputs[node_id] = outputs[module_name]
    return result, outputs


def node_record(node_id: str, t: torch.Tensor) -> NodeRecord:
    grad = t.grad if t.requires_grad else None
    reason = None
    if grad is None:
        root = node_id.split(".")[0]
        reason = NO_GRAD_REASON.get(root, "no gradient flows to this tensor")
    return NodeRecord(tuple(t.shape), str(t.dtype).removeprefix("torch."), _as_python(t),
                      None if grad is None else _as_python(grad), reason)


# One unit ~ a G=8 result (~32 KB as Python lists); G=4096 weighs 65 units (~4.5 MB).
@cached_computation(maxsize=512, weight=lambda r: 1 + r.params.group_size // 64)
def run_grpo_step(params: GRPOParams, device: str = "cpu") -> StepResult:
    """Deterministic for (params, device): safe to cache, safe to call from many threads."""
    cfg = ToyConfig(clip_epsilon=params.clip_epsilon, beta=params.beta,
                    advantage_epsilon=params.advantage_epsilon)
    prompt = TOY_PROMPTS[params.prompt]
    gen = torch.Generator().manual_seed(params.seed)
    model = ToyGRPO(cfg).to(dtype=DTYPE)
    base = base_state(cfg.n_features, cfg.n_choices, DTYPE)
    for copy in (model.policy, model.old_policy, model.reference_policy):
        copy.load_state_dict({k: v.clone() for k, v in base.items()}, strict=False)
    model.to(device)
    x = torch.tensor([prompt.features], dtype=DTYPE, device=device)  # (1, F)

    for it in range(params.iteration):
        _freeze_old(model)
        actions = _sample(model, x, params.group_size, gen)
        rewards = accuracy_reward(actions, prompt)
        for m in range(params.inner_steps):
            _update(model, x, actions, rewards, params.learning_rate, f"iteration {it}, update {m}")

    _freeze_old(model)
    actions = _sample(model, x, params.group_size, gen)
    rewards = (torch.tensor(params.rewards, dtype=DTYPE, device=device) if params.rewards is not None
               else accuracy_reward(actions, prompt))
    for m in range(params.inner_step):
        _update(model, x, actions, rewards, params.learning_rate, f"iteration {params.iteration}, update {m}")

    recorded = record_grpo_step(model, x, actions, rewards, params.clip_epsilon)
    history = {
        "iterations_before": params.iteration,
        "updates_per_iteration": params.inner_steps,
        "updates_in_current_iteration": params.inner_step,
        "policy_updates_so_far": params.iteration * params.inner_steps + params.inner_step,
        "old_policy": f"frozen at the start of iteration {params.iteration} (0-based)",
        "reference_policy": "the base checkpoint (the policy before any update)",
        "reward_rule": "override from the request" if params.rewards is not None
        else f"accuracy: 1 if the choice is {prompt.correct}, else 0",
    }
    return StepResult(params, device, prompt, recorded.samples, recorded.objective, recorded.loss,
                      recorded.nodes, recorded.parameter_grads, history)


@dataclass(frozen=True)
class RecordedStep:
    samples: list[dict]
    objective: float
    loss: float
    nodes: dict[str, NodeRecord]
    parameter_grads: dict[str, dict]


def record_grpo_step(model: ToyGRPO, x, actions, rewards, clip_epsilon: float) -> RecordedStep:
    """One forward + backward of the GRPO loss with every node's value and grad kept."""
    result, outputs = _record(model, x, actions, rewards)
    if not torch.isfinite(result["loss"]):
        raise TrainingDiverged("the shown step's loss is not finite; lower learning_rate or beta")
    nodes = {node_id: node_record(node_id, t) for node_id, t in outputs.items()}
    ratio, adv = result["ratio"].detach(), result["advantages"].detach()
    clip_active = ((adv > 0) & (ratio > 1 + clip_epsilon)) | ((adv < 0) & (ratio < 1 - clip_epsilon))
    columns = {
        "action": actions, "reward": rewards, "logp": result["logp"], "logp_old": result["logp_old"],
        "logp_ref": result["logp_ref"], "advantage": adv, "ratio": ratio,
        "clipped": result["surrogate"], "divergence": result["divergence"],
        "objective": result["per_sample"], "clip_active": clip_active,
        "ratio_grad": outputs["ratio"].grad,
    }
    as_lists = {k: _as_python(v) for k, v in columns.items()}
    samples = [dict(zip(as_lists, row)) for row in zip(*as_lists.values())]
    return RecordedStep(samples, float(result["objective"].detach()), float(result["loss"].detach()), nodes,
                        parameter_grads(model.policy))


def parameter_grads(policy) -> dict[str, dict]:
    return {f"policy.{name}": {"shape": list(p.shape), "values": _as_python(p),
                               "grad": None if p.grad is None else _as_python(p.grad)}
            for name, p in policy.named_parameters()}
