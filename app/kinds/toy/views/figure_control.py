"""The control at a toy step's figure (issue 32, "Direct manipulation where it teaches"): the one
parameter the step is about, changed right beside the figure that shows its effect. ε on the clip
step, β on the reference step, the group's rewards on the advantages step.

A GET form to the step's own URL: with script, htmx asks for the figure's body alone (the page
route answers only it when HX-Target names it, web/pages.py) and swaps it in place, the control
outside the swapped part so it keeps focus while it is dragged; without script its Apply button
loads the page. The form carries the rest of the view (every other parameter, the node, the open
modules) as hidden inputs, so only the one parameter changes.

ε and β are set for the shown update only (step_clip_epsilon, step_beta): the replayed history keeps
clip_epsilon and beta, so the group, π_old, π_ref and every ratio stay put and only the band (or the
KL part) moves across them, which is what the clip and the penalty teach. The full form's fields keep
setting the whole history; beside them a note (sent out of band with each change) says what the
figure sets, and the form carries it as a hidden input.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.kinds.toy.engine.params import STEP_OVERRIDES, GRPOParams
from app.views import numbers

FIGURE_BODY_ID = "story-figure-body"  # the swapped part: HX-Target names it (web/pages.py)
CONTROL_ID = "figure-control"
MAX_EDITABLE_REWARDS = 16  # a bigger group's rewards are edited in the full form


@dataclass(frozen=True)
class Slider:
    min: float
    max: float
    step: float


# The slider of each step's parameter: the range a reader explores; a value outside it (typed in the
# full form) is still shown exactly in the readout, the slider at its nearest end.
SLIDERS = {
    "step_clip_epsilon": Slider(0.01, 0.6, 0.01),
    "step_beta": Slider(0.0, 1.0, 0.01),
}
SYMBOLS = {"clip_epsilon": "ε", "beta": "β"}


@dataclass(frozen=True)
class FigureControl:
    name: str                         # the GRPOParams field it sets
    label: str
    value: str                        # as the URL writes it
    value_text: str                   # the readout beside the slider
    hidden: tuple[tuple[str, str], ...]  # the rest of the view, as the form sends it
    slider: Slider | None = None
    rewards: tuple[tuple[int, str, str, str], ...] = ()  # (i, its choice, its answer, value) per completion
    note: str = ""                    # what else the change moves (ε_high following ε)

    @property
    def beside(self) -> str | None:
        """The full form's field whose value the control overrides at the shown update (clip_epsilon, beta)."""
        return STEP_OVERRIDES.get(self.name)

    @property
    def input_id(self) -> str:
        return f"fc-{self.name}"

    @property
    def slider_value(self) -> str:
        """The slider's position: the value, inside the slider's range."""
        assert self.slider is not None
        return numbers.param(min(max(float(self.value), self.slider.min), self.slider.max))


def high_follows(params: GRPOParams) -> bool:
    """The band's top follows ε: the URL does not set ε_high and the preset names none (DAPO's 0.28 does)."""
    return params.high_follows()


SAME_GROUP = "The group and its ratios stay: only this update’s objective changes."


def _clip_note(params: GRPOParams) -> str:
    if high_follows(params):
        return f"The band’s top follows: [1 − ε, 1 + ε]. {SAME_GROUP}"
    return (f"The band’s top stays at 1 + ε_high = {numbers.param(1 + params.clip_epsilon_high)} "
            f"(set apart from ε, by the preset or the full form, which changes it). {SAME_GROUP}")


def history_text(name: str, params: GRPOParams) -> str:
    """" (earlier updates: 0.2)" when the shown update's value differs from the history's, else ""."""
    base = STEP_OVERRIDES[name]
    if getattr(params, name) is None:
        return ""
    return f" at this update (earlier updates: {numbers.param(getattr(params, base))})"


def value_text(name: str, params: GRPOParams) -> str:
    c = params.shown_conventions()
    if name == "step_clip_epsilon":
        eps, high = c.clip_epsilon, c.clip_epsilon_high
        return (f"ε = {numbers.param(eps)}{history_text(name, params)}: band [{numbers.param(round(1 - eps, 12))}, "
                f"{numbers.param(round(1 + high, 12))}]")
    if name == "step_beta":
        return f"β = {numbers.param(c.beta)}{history_text(name, params)}"
    return ""


def shown_update_words(params: GRPOParams) -> str:
    """What the figure's controls set apart from the history, in a sentence; "" when nothing."""
    c = params.shown_conventions()
    parts = [f"{SYMBOLS[base]} = {numbers.param(getattr(c, base))} (the earlier updates: "
             f"{numbers.param(getattr(params, base))})"
             for name, base in STEP_OVERRIDES.items() if getattr(params, name) is not None]
    return f"At the shown update only: {', '.join(parts)}." if parts else ""


def build_figure_control(step_id: str, params: GRPOParams, query: dict[str, str], samples: list[dict] | None,
                         labels: list[str]) -> FigureControl | None:
    """The control of the clip, reference and advantages steps; None where the step has none, or where
    the group is too big to edit here. `query` is the view's canonical URL query."""
    if step_id == "clip":
        name, label = "step_clip_epsilon", "ε, the clip range"
    elif step_id == "reference":
        name, label = "step_beta", "β, the KL penalty’s weight"
    elif step_id == "advantages":
        name, label = "rewards", "The group’s rewards"
    else:
        return None
    hidden = tuple((k, v) for k, v in query.items() if k != name)
    if name == "rewards":
        if not samples or len(samples) > MAX_EDITABLE_REWARDS:
            return None
        rewards = tuple((i, str(s.get("action", "?")), labels[i] if i < len(labels) else "?",
                         numbers.param(float(s["reward"]))) for i, s in enumerate(samples))
        value = ",".join(r[-1] for r in rewards)
        return FigureControl(name, label, value, f"r = {value.replace(',', ', ')}", hidden, rewards=rewards,
                             note="One reward per completion; the advantages follow as you type.")
    value = numbers.param(getattr(params.shown_conventions(), STEP_OVERRIDES[name]))
    note = (_clip_note(params) if name == "step_clip_epsilon"
            else f"β = 0 turns the KL penalty off. {SAME_GROUP}")
    return FigureControl(name, label, value, value_text(name, params), hidden, slider=SLIDERS[name], note=note)
