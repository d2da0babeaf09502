"""The real-model page's own part of the URL: the step's parameters (SmolParams) and which answer and
head the attention figure shows. A refused parameter is kept with its message, for the form and the 422.
The reader's own question (`prompt_text`, `expected`) travels in the URL as typed: never lower-cased, and
"none" in it is text, not "off"."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import ValidationError

from app.domain.training_paths import PATH_IDS, URL_KEY
from app.engine.grpo.params import OFF
from app.kinds.smollm.domain.own_prompt import NO_ACCURACY, own_task
from app.kinds.smollm.domain.tasks import Task
from app.kinds.smollm.engine.params import TEXT_FIELDS, SmolParams
from app.views.urls import query_value

FIELDS = tuple(SmolParams.model_fields)
MAX_INDEX = 999


class BadSmolView(ValueError):
    """A view value (answer or head index) that is not a small whole number; the message names it."""


@dataclass(frozen=True)
class SmolQuery:
    params: SmolParams
    completion: int = 0
    head: int = 0
    raw: dict[str, str] = field(default_factory=dict)  # the parameters as typed
    refused: dict[str, str] | None = None  # field -> why, when the typed parameters were refused
    process: str | None = None  # the training path the paths panel shows (?process=r1-zero)

    def query(self) -> dict[str, str]:
        """The non-default parameters, then the view's indices (app/views/view_state.py's KindState)."""
        if self.refused is not None:
            q = dict(self.raw)
        else:
            q = {name: value if name in TEXT_FIELDS else query_value(name, value)
                 for name, value in self.params.url_overrides().items()}
            if "max_length" in q and self.params.max_length == self.params.max_new_tokens:
                del q["max_length"]  # it follows max_new_tokens unless set apart
        if self.completion:
            q["completion"] = str(self.completion)
        if self.head:
            q["head"] = str(self.head)
        if self.process:
            q[URL_KEY] = self.process
        return q

    @property
    def own_task(self) -> Task | None:
        """The reader's own question as a task (its reward rules for the form), or None for a built-in prompt."""
        p = self.params
        return own_task(p.prompt_text, p.expected) if p.prompt_text is not None else None

    @property
    def no_accuracy(self) -> str | None:
        """Why a typed question without an expected answer has no accuracy reward; None otherwise."""
        return NO_ACCURACY if self.params.prompt_text is not None and self.params.expected is None else None

    def with_view(self, **change) -> SmolQuery:
        return SmolQuery(self.params, change.get("completion", self.completion), change.get("head", self.head),
                         self.raw, self.refused, change.get("process", self.process))


def _index(raw: str | None, name: str) -> int:
    if raw is None or raw == "":
        return 0
    if not raw.isdigit() or len(raw) > len(str(MAX_INDEX)):
        raise BadSmolView(f"{name} must be a whole number from 0 to {MAX_INDEX}, got {raw!r}")
    return int(raw)


def read_smol_query(query: Mapping[str, str]) -> SmolQuery:
    raw = {k: v.strip() for k in FIELDS if (v := query.get(k)) is not None and v.strip() != ""}
    values = {k: (None if v == OFF and k not in TEXT_FIELDS else v) for k, v in raw.items()}
    completion, head = _index(query.get("completion"), "completion"), _index(query.get("head"), "head")
    process = query.get(URL_KEY) or None
    if process is not None and process not in PATH_IDS:
        raise BadSmolView(f"{URL_KEY} must be one of {', '.join(PATH_IDS)}, got {process!r}")
    try:
        return SmolQuery(SmolParams(**values), completion, head, raw, process=process)
    except ValidationError as exc:
        refused: dict[str, str] = {}
        for err in exc.errors():
            name = str(err["loc"][0]) if err.get("loc") else "request"
            refused.setdefault(name, err.get("msg", "invalid").removeprefix("Value error, "))
        return SmolQuery(SmolParams(), completion, head, raw, refused, process)
