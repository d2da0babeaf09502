"""A task's prompt for the real model: its user message in the model's chat template."""
from __future__ import annotations

from app.engine.lm.loaded import LoadedModel
from app.engine.lm.sampling import chat_ids
from app.kinds.smollm.domain.tasks import Task


def prompt_ids(loaded: LoadedModel, task: Task) -> list[int]:
    """The task's user message in the model's chat template, ending with the assistant's opening."""
    return chat_ids(loaded, task.text)
