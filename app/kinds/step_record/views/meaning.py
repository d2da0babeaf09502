"""What each node of a recorded step's graph means. The graph is the GRPO head
(engine/head_model.py) with the recorded model as one node, `policy`, named after the model the
record names; the head's formulas are written for the conventions in force (views/convention_text)."""
from __future__ import annotations

from app.domain.snapshot import Node, Snapshot
from app.engine.grpo.params import Conventions
from app.views import convention_text as ct
from app.views.meaning import NodeMeaning
from app.views.numbers import MINUS

MARKER = "model::RecordedPolicy"  # a template only this graph has

# template -> (name, formula key in convention_text.FORMULAS or a formula, sentence)
MODULES = {
    "model::GroupAdvantages": ("Group advantages A", "advantages",
                               "The framework's advantage of each completion, from its reward against its group's "
                               "(recorded; a what-if recomputes them from the rewards)."),
    "model::PolicyRatio": ("Per-token ratio ρ", "ratio",
                           "How many times more likely the policy makes each sampled token at loss time than the "
                           "sampler did, from the recorded log-probs; 1 = unchanged."),
    "model::ClippedSurrogate": ("Clipped surrogate L (per token)", "clipped",
                                "Each token's push, ratio times advantage, capped once its ratio leaves the band in "
                                "the advantage's direction: a capped token gets no gradient from it."),
    "model::ReferencePenalty": ("KL per token D", "divergence",
                                "The estimate of how far the policy has drifted from the reference model, from the "
                                "recorded reference log-probs; weighted by β in the loss."),
    "model::LossAggregation": ("Loss aggregation J", "objective",
                               "Adds the per-token terms up with the weights the aggregation sets (per completion, "
                               "over all tokens, or over a fixed length)."),
}
TOP = {
    "Input": ("The recorded batch", None, "What the record holds: each completion's tokens, mask and rewards, and "
              "the log-probs the framework computed (old, reference, rollout)."),
    "torch.neg": ("Loss = −J", f"loss = {MINUS}J", "The one number the step lowers; checked against the logged loss."),
    "Output": ("Loss", f"loss = {MINUS}J", "What the step returns: its gradient reaches every recorded log-prob."),
}


def is_record_graph(snapshot: Snapshot) -> bool:
    return MARKER in snapshot.module_template_ids


def describe_record(snapshot: Snapshot, node: Node, conventions: Conventions | None = None,
                    group_size: int | None = None) -> NodeMeaning | None:
    if not is_record_graph(snapshot):
        return None
    template = node.metadata.module_template_id or ""
    if template == MARKER:
        return NodeMeaning(f"{snapshot.name} (recorded)", "log π_θ(o_t | q, o_<t) for every completion token",
                           f"The model your run trained, {snapshot.name}: the app has not its weights, only the "
                           "log-probability it gave each completion token at loss time, as recorded. Every "
                           "gradient on this page stops here: ∂loss/∂log π per token.")
    if template in MODULES:
        name, key, sentence = MODULES[template]
        formula = ct.FORMULAS[key](conventions) if conventions is not None and key in ct.FORMULAS else None
        return NodeMeaning(name, formula, sentence)
    if node.op == "Python":
        owner = node.node_id.removeprefix("python@").split("#")[0]
        return NodeMeaning(f"The {owner} expression", None, "The module's one statement; it shows the module's output.")
    if node.parent_id is None and node.op in TOP:
        return NodeMeaning(*TOP[node.op])
    return None
