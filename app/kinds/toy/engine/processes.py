"""Run R1-Zero, R1 and distillation for real, at toy scale (DeepSeek-R1 §2.2-2.4).

Each stage trains (or samples) a CompletionPolicy on the six toy prompts:
- sft / distill_sft: full-batch gradient descent on cross-entropy of curated
  (prompt, choice) pairs;
- grpo: the engine's GRPO loss (model.ToyGRPO) with the stage's reward rule,
  the reference being the checkpoint the stage starts from;
- rejection_sampling: samples from the current policy, keeps those every reward
  component pays for; no gradient step.
Metrics are exact expectations over the policy's probabilities, not samples.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from app.engine.grpo.head import DTYPE
from app.engine.runtime.compute import cached_computation
from app.engine.runtime.training import SGD
from app.kinds.toy.domain.process_spec import ProcessCatalog, Stage
from app.kinds.toy.domain.toy_task import TOY_PROMPTS
from app.kinds.toy.engine.checkpoints import base_state, student_base_state
from app.kinds.toy.engine.model import CompletionPolicy, ToyConfig, ToyGRPO
from app.kinds.toy.engine.rewards import rewards_for

GROUP_SIZE = 16  # G: R1 used 16 (§2.2.1)
INNER_STEPS = 2  # mu: policy updates per sampled group, so rho moves off 1
GRPO_LR = 0.3
SFT_LR = 0.5
COLD_START_PROMPTS = (0, 1, 2)  # "a small amount" of curated data: half the prompts
EVAL_REWARD = ("accuracy", "format", "language")  # one yardstick for every stage
STUDENT_BOTTLENECK = 1

X = torch.tensor([p.features for p in TOY_PROMPTS], dtype=DTYPE)  # (P, F)


def new_policy(checkpoint: dict[str, torch.Tensor]) -> CompletionPolicy:
    student = any(k.startswith("logits.0") for k in checkpoint)
    policy = CompletionPolicy(ToyConfig(), bottleneck=STUDENT_BOTTLENECK if student else None).to(DTYPE)
    policy.load_state_dict(checkpoint)
    return policy


def snapshot_state(policy: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in policy.state_dict().items()}


METRICS_NOTE = ("eval_reward: expected accuracy + format + language reward (max 2); "
                "accuracy: share of the six prompts whose most likely choice is right; "
                "divergence: mean KL(final || base checkpoint) (the student: || its own base)")


@dataclass(frozen=True)
class Metrics:
    eval_reward: float  # expected accuracy+format+language reward, max 2.0
    accuracy: float  # share of prompts whose most likely choice has the right answer
    p_correct: float  # mean probability of the readable correct choice
    p_mixed: float  # mean probability of the right answer in mixed language
    divergence: float  # mean exact KL(pi || pi_ref) over prompts


def measure(policy: CompletionPolicy, reference: CompletionPolicy) -> Metrics:
    with torch.no_grad():
        logp, logp_ref = policy(X), reference(X)  # (P, C)
        p = logp.exp()
        roles = torch.tensor([[pr.role(c) == "correct" for c in range(4)] for pr in TOY_PROMPTS])
        mixed = torch.tensor([[pr.role(c) == "mixed" for c in range(4)] for pr in TOY_PROMPTS])
        right = roles | mixed
        greedy = logp.argmax(dim=1)
        return Metrics(
            eval_reward=float((p * rewards_for(EVAL_REWARD)).sum(1).mean()),
            accuracy=float(right[torch.arange(len(TOY_PROMPTS)), greedy].to(DTYPE).mean()),
            p_correct=float((p * roles).sum(1).mean()),
            p_mixed=float((p * mixed).sum(1).mean()),
            divergence=float((p * (logp - logp_ref)).sum(1).mean()),
        )


@dataclass(frozen=True)
class CurvePoint:
    iteration: int
    metrics: Metrics
    loss: float | None  # training loss of the update made at this iteration
    train_reward: float | None  # mean sampled reward of the groups (GRPO only)


@dataclass(frozen=True)
class LastUpdate:
    """What the node view of a stage replays: its final training step."""
    policy_state: dict
    old_state: dict | None
    reference_state: dict
    actions: torch.Tensor | None  # (P, G) GRPO groups
    rewards: torch.Tensor | None  # (P, G)
    targets: tuple[tuple[int, int], ...] = ()  # SFT (prompt, choice) pairs


@dataclass(frozen=True)
class StageRun:
    stage: Stage
    curve: tuple[CurvePoint, ...]
    start_metrics: Metrics
    end_metrics: Metrics
    start_state: dict
    end_state: dict | None  # None for rejection sampling (it makes data, not a model)
    dataset: tuple[tuple[int, int], ...] = ()  # kept (prompt, choice) pairs
    sampled: int = 0
    last: LastUpdate | None = None
    seconds: float = 0.0

    @property
    def final_update(self) -> LastUpdate:
        """The update a stage's node view replays; a stage that made none has nothing to show."""
        if self.last is None:
            raise ValueError(f"stage {self.stage.id!r} made no training update")
        return self.last


@dataclass(frozen=True, eq=False)  # hashed by identity: runs come from a cache, one object per key
class ProcessRun:
    process_id: str
    seed: int
    stages: tuple[StageRun, ...]
    seconds: float
    final: Metrics

    def stage(self, stage_id: str) -> StageRun:
        for s in self.stages:
            if s.stage.id == stage_id:
                return s
        raise KeyError(stage_id)


def _grpo_stage(stage: Stage, start: dict, reference: dict, gen: torch.Generator, iterations: int):
    model = ToyGRPO(ToyConfig()).to(DTYPE)
    model.policy.load_state_dict(start)
    model.reference_policy.load_state_dict(reference)
    table = rewards_for(stage.reward)
    optimizer = SGD(model.policy, GRPO_LR)
    curve, last = [], None
    for it in range(iterations):
        model.old_policy.load_state_dict(model.policy.state_dict())
        with torch.no_grad():
            probs = model.old_policy(X).exp()  # (P, C)
        actions = torch.multinomial(probs, GROUP_SIZE, replacement=True, generator=gen)  # (P, G)
        rewards = table.gather(1, actions)  # (P, G)
        for m in range(INNER_STEPS):
            if it == iterations - 1 and m == INNER_STEPS - 1:
                last = LastUpdate(snapshot_state(model.policy), snapshot_state(model.old_policy),
                                  snapshot_state(model.reference_policy), actions, rewards)
            loss = torch.stack([model(X[i:i + 1], actions[i], rewards[i])["loss"]
                                for i in range(len(TOY_PROMPTS))]).mean()
            optimizer.descend(loss)
        curve.append(CurvePoint(it + 1, measure(model.policy, model.reference_policy), float(loss.detach()),
                                float(rewards.mean())))
    return snapshot_state(model.policy), tuple(curve), last


def _sft_stage(start: dict, reference: dict, data: tuple[tuple[int, int], ...], iterations: int):
    policy, ref = new_policy(start), new_policy(reference)
    if not data:  # nothing survived curation: the stage cannot train
        return snapshot_state(policy), (), None
    idx = torch.tensor([d[0] for d in data])
    target = torch.tensor([d[1] for d in data])
    optimizer = SGD(policy, SFT_LR)
    curve, last = [], None
    for it in range(iterations):
        if it == iterations - 1:
            last = LastUpdate(snapshot_state(policy), None, snapshot_state(ref), None, None, data)
        loss = F.nll_loss(policy(X[idx]), target)  # cross-entropy on log-probabilities
        optimizer.descend(loss)
        curve.append(CurvePoint(it + 1, measure(policy, ref), float(loss.detach()), None))
    return snapshot_state(policy), tuple(curve), last


def _rejection_sampling(stage: Stage, start: dict, gen: torch.Generator):
    policy = new_policy(start)
    with torch.no_grad():
        probs = policy(X).exp()
    samples = torch.multinomial(probs, stage.samples_per_prompt, replacement=True, generator=gen)  # (P, K)
    components = [rewards_for((c,)) for c in stage.reward]
    kept = []
    for i in range(len(TOY_PROMPTS)):
        for choice in samples[i].tolist():
            if all(float(table[i, choice]) > 0 for table in components):
                kept.append((i, choice))
    return tuple(kept), samples.numel()


@cached_computation(maxsize=64)
def run_process(catalog: ProcessCatalog, process_id: str, seed: int, iterations_scale: int = 1) -> ProcessRun:
    """Deterministic per (catalog, process, seed, scale); earlier processes it needs run first (cached)."""
    began = time.perf_counter()
    process = catalog.get(process_id)
    checkpoints = _checkpoints_before(catalog, process_id, seed, iterations_scale)
    datasets: dict[str, tuple] = {"cold-start": tuple((i, TOY_PROMPTS[i].correct) for i in COLD_START_PROMPTS)}
    gen = torch.Generator().manual_seed(seed)
    runs = []
    for stage in process.stages:
        t0 = time.perf_counter()
        start, reference = checkpoints[stage.start], checkpoints[stage.reference]
        start_metrics = measure(new_policy(start), new_policy(reference))
        iterations = stage.iterations * iterations_scale
        dataset, sampled, end_state, curve, last = (), 0, None, (), None
        if stage.kind == "grpo":
            end_state, curve, last = _grpo_stage(stage, start, reference, gen, iterations)
        elif stage.kind in ("sft", "distill_sft"):
            assert stage.data is not None, "the spec requires data for every SFT stage"
            dataset = datasets[stage.data]
            end_state, curve, last = _sft_stage(start, reference, dataset, iterations)
        else:
            dataset, sampled = _rejection_sampling(stage, start, gen)
        if end_state is not None:
            checkpoints[stage.output] = end_state
            end_metrics = measure(new_policy(end_state), new_policy(reference))
        else:
            datasets[stage.output] = dataset
            end_metrics = start_metrics
        runs.append(StageRun(stage, curve, start_metrics, end_metrics, start, end_state, dataset, sampled, last,
                             time.perf_counter() - t0))
    final_state = next((r.end_state for r in reversed(runs) if r.end_state is not None), None)
    final = measure(new_policy(final_state), new_policy(checkpoints["base"])) if final_state is not None \
        and not any(k.startswith("logits.0") for k in final_state) else runs[-1].end_metrics
    return ProcessRun(process_id, seed, tuple(runs), time.perf_counter() - began, final)


def _checkpoints_before(catalog: ProcessCatalog, process_id: str, seed: int, scale: int) -> dict:
    """Root checkpoints plus every output of the processes listed before this one."""
    checkpoints = {"base": base_state(), "student-base": student_base_state(STUDENT_BOTTLENECK)}
    needed = {s.start for s in catalog.get(process_id).stages} | {s.reference for s in catalog.get(process_id).stages}
    for proc in catalog.processes:
        if proc.id == process_id:
            break
        if needed & {s.output for s in proc.stages}:
            for run in run_process(catalog, proc.id, seed, scale).stages:
                if run.end_state is not None:
                    checkpoints[run.stage.output] = run.end_state
    return checkpoints
