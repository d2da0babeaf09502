"""A task's prompt for the real model: its user message in the model's chat template."""
from __future__ import annotations

from collections.abc import Sequence

from app.engine.lm.loaded import LoadedModel
from app.engine.lm.sampling import chat_ids
from app.kinds.smollm.domain.own_prompt import own_task
from app.kinds.smollm.domain.tasks import TASKS, Task
from app.kinds.smollm.engine.params import SmolParams


def task_of(params: SmolParams, tasks: Sequence[Task] = TASKS) -> Task:
    """The task the step answers: the reader's own question when `prompt_text` is given (its rule rewards
    from domain/own_prompt.py), else the built-in prompt `params.prompt`."""
    if params.prompt_text is not None:
        return own_task(params.prompt_text, params.expected)
    return tasks[params.prompt]


def prompt_ids(loaded: LoadedModel, task: Task) -> list[int]:
    """The task's user message in the model's chat template, ending with the assistant's opening."""
    return chat_ids(loaded, task.text)
