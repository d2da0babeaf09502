"""What the token strips of each tiny-LM step show (reveal, don't repeat): the metric
the step introduces, and what its cards may say so far (no ρ or ✂ before `ratio`, no KL before
`kl`). Also each completion's verdict in the words of the reward rule in force."""
from __future__ import annotations

from app.kinds.tiny_lm.domain.arith_task import END, parse, parse_free_text, read_number
from app.kinds.tiny_lm.engine.token_records import TokenStepResult
from app.views.numbers import readout
from app.views.tokens.token_view import TokenPanel
from app.views.tokens.token_view import build_token_panel as build_strips

STEPS = ("sample", "rewards", "advantages", "ratio", "kl", "aggregation", "update")
STEP_METRIC = {"sample": "logp_old", "rewards": "reward", "advantages": "advantage", "ratio": "ratio",
               "kl": "kl", "aggregation": "weight", "update": "delta"}
# what each step adds to the strips and cards; a step shows its own and every earlier step's
ADDS = {"sample": ("logp_old",), "rewards": ("reward",), "advantages": ("advantage",), "ratio": ("ratio",),
        "kl": ("kl",), "aggregation": ("weight", "grad"), "update": ("delta",)}


def shown_at(step_id: str) -> frozenset[str] | None:
    """What `step_id` has introduced; None (everything) for a step this walkthrough does not know."""
    if step_id not in STEPS:
        return None
    return frozenset(m for s in STEPS[:STEPS.index(step_id) + 1] for m in ADDS[s])


def verdict(answer: int, text: str, accuracy: float, format_: float, language: float,
            counted: tuple[str, ...]) -> str:
    """What the reward rule in force made of a completion, part by part, with what each part paid.
    A right sum outside <answer> is said to be right and paid 0; a part the rule does not count
    says so."""
    parsed = parse(text)
    if accuracy:
        said = "right answer"
    elif parsed.answer is not None:
        said = f"wrong answer ({parsed.answer})"
    elif read_number(parse_free_text(text)) == answer:
        said = f"right sum ({answer}) outside <answer>"
    else:
        said = "no answer in <answer>…</answer>"
    if format_:
        form = "template kept"
    elif not text.endswith(END):
        form = "no <end>"
    elif parsed.think is None:
        form = "no <think> template"
    else:
        form = "template broken"
    lang = ("one script" if language == 1 else f"{round(100 * language)}% in the prompt's script")
    parts = [f"{said}: accuracy {readout(accuracy)}", f"{form}: format {readout(format_)}",
             f"{lang}: language {readout(language)}" + ("" if "language" in counted else " (not counted)")]
    return " · ".join(parts)


def verdicts(result: TokenStepResult) -> tuple[str, ...]:
    return tuple(verdict(result.answer, c.text, c.accuracy, c.format, c.language, result.reward_parts)
                 for c in result.completions)


def build_token_panel(result: TokenStepResult, step_id: str, metric_id: str | None = None) -> TokenPanel:
    p = result.params
    bounds = (1 - p.clip_epsilon, 1 + p.clip_epsilon_high, *((p.dual_clip,) if p.dual_clip else ()))
    return build_strips(result, step_id, metric_id, STEP_METRIC.get(step_id, "grad"), shown_at(step_id),
                        verdicts(result), result.grad_kl or None, bounds)
