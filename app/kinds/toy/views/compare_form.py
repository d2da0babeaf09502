"""Compare mode's controls: the GET form that picks both sides and the one-click case links.

Plain links and a GET form, so Compare mode works without JavaScript; the form keeps every
other part of the URL (step view, A's parameters, B's other overrides) as hidden fields.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.engine.grpo.params import Conventions
from app.engine.grpo.presets import PRESET_NAMES, PRESET_TITLES, PRESETS
from app.kinds.toy.views.compare_cases import CASES, CompareCase
from app.kinds.toy.views.form import allowed_range
from app.kinds.toy.views.screen import ToyScreen
from app.kinds.toy.views.url_state import COMPARE_KEYS, CompareRequest
from app.views.urls import COMPARE_PREFIX, conventions_query, query_value

ENTER_PRESET = "trl"  # the Compare button: the page's step against TRL's defaults
FORM_KEYS = ("vs_preset", "vs_beta")  # the vs_ fields the form shows; others ride along hidden


@dataclass(frozen=True)
class CaseLink:
    case: CompareCase
    url: str
    current: bool


@dataclass(frozen=True)
class CompareForm:
    a_preset: str
    b_preset: str
    b_beta: str               # typed, or "" for the preset's
    b_beta_placeholder: str
    errors: dict[str, str]    # vs_ key -> message
    hidden: tuple[tuple[str, str], ...]  # everything else the URL keeps
    presets: tuple[tuple[str, str], ...] = tuple((p, PRESET_TITLES[p]) for p in PRESET_NAMES)

    @property
    def other_errors(self) -> list[tuple[str, str]]:
        return [(k, m) for k, m in self.errors.items() if k not in FORM_KEYS]


def compare_form(screen: ToyScreen, request: CompareRequest, b: Conventions | None) -> CompareForm:
    state = screen.state
    query = state.query(screen.snapshot)
    hidden = [(k, v) for k, v in query.items() if k != "preset" and not k.startswith(COMPARE_PREFIX)]
    if b is not None:
        hidden += [(k, v) for k, v in conventions_query(b).items() if k not in FORM_KEYS]
        typed_beta = query_value("beta", b.beta) if b.beta != PRESETS[b.preset]["beta"] else ""
        b_preset: str = b.preset
    else:  # refused: keep what was typed, drop what was refused
        hidden += [(k, v) for k, v in request.typed.items()
                   if k not in FORM_KEYS and k not in request.errors and v]
        typed_beta = request.typed.get("vs_beta", "")
        b_preset = request.typed.get("vs_preset", "") or ("deepseekmath" if request.on else ENTER_PRESET)
    preset_beta = PRESETS.get(b_preset, PRESETS["deepseekmath"])["beta"]
    errors = {}
    for key, message in request.errors.items():
        allowed = allowed_range(key.removeprefix(COMPARE_PREFIX)) if key in COMPARE_KEYS else None
        errors[key] = message + (f" (allowed: {allowed})" if allowed else "")
    return CompareForm(state.own.params.preset, b_preset, typed_beta, f"preset's: {query_value('beta', preset_beta)}",
                       errors, tuple(hidden))


def case_links(screen: ToyScreen) -> tuple[CaseLink, ...]:
    state, own = screen.state, screen.state.own
    return tuple(CaseLink(case, screen.url(state.with_own(compare=case.conventions, params=case.params,
                                                           process=None, stage=None)),
                          own.process is None and own.params == case.params and own.compare == case.conventions)
                 for case in CASES)
