"""The real model's built-in prompts and rule rewards (app/kinds/smollm/domain/tasks.py).

Chosen by measuring SmolLM2-135M-Instruct (the real checkpoint, chat template, temperature 0.8, G = 8, up to 48
new tokens): 40 completions per candidate prompt, drawn in one batch from one seeded generator and cut into
5 groups of 8. Of 8 candidates, "repeat banana" (1 of 40 answers starts with the word) and "end with a final
line 'Answer: Rome'" (0 of 40 use the line; 3 of 5 groups all 0) were dropped. The six kept (reward = accuracy
1.0 + brevity 0.5; mean reward over the 40, within-group std mean ± std over the 5 groups, groups whose
rewards are not all equal):

    capital-france  mean 0.71  std 0.49 ± 0.04  5/5  (accuracy 25/40, brevity <= 8 words 7/40)
    add-3-4         mean 0.70  std 0.58 ± 0.03  5/5  (accuracy 18/40, brevity 20/40)
    opposite-hot    mean 0.72  std 0.56 ± 0.08  5/5  (accuracy 16/40, brevity 26/40)
    spider-legs     mean 0.78  std 0.45 ± 0.07  5/5  (accuracy 25/40, brevity 12/40)
    extract-name    mean 0.86  std 0.42 ± 0.16  5/5  (first word "Maria" 29/40, <= 2 words 11/40)
    capital-japan   mean 0.64  std 0.49 ± 0.05  5/5  (accuracy 21/40, brevity 9/40)

Here the rules themselves, on texts like the model's.
"""
from __future__ import annotations

import pytest

from app.kinds.smollm.domain.tasks import TASKS, Task, at_most_words, first_word_is, mentions

BY_NAME = {task.name: task for task in TASKS}


def test_six_prompts_each_with_named_parts_that_say_what_they_pay():
    assert len(TASKS) == 6 and len(BY_NAME) == 6
    for task in TASKS:
        assert task.part_names[0] == "accuracy" and len(set(task.part_names)) == len(task.parts)
        assert all(part.pays.endswith(".") and len(part.pays) > 20 for part in task.parts)


@pytest.mark.parametrize(("name", "text", "parts"), [
    ("capital-france", "The capital of France is Paris.", {"accuracy": 1.0, "brevity": 0.5}),
    ("capital-france", "Paris", {"accuracy": 1.0, "brevity": 0.5}),
    ("capital-france", "Although not officially recognized by the French government, the capital of France is Paris.",
     {"accuracy": 1.0, "brevity": 0.0}),
    ("capital-france", "Lyon.", {"accuracy": 0.0, "brevity": 0.5}),
    ("capital-france", "Parisian cafes are lovely.", {"accuracy": 0.0, "brevity": 0.5}),  # a whole word only
    ("add-3-4", "8", {"accuracy": 0.0, "brevity": 0.5}),
    ("add-3-4", "3 + 4 = 7", {"accuracy": 1.0, "brevity": 0.5}),
    ("add-3-4", "17", {"accuracy": 0.0, "brevity": 0.5}),
    ("opposite-hot", "The opposite of hot is COLD.", {"accuracy": 1.0, "brevity": 0.5}),
    ("spider-legs", "A spider has 8 legs.", {"accuracy": 1.0, "brevity": 0.5}),
    ("extract-name", "Maria.", {"accuracy": 1.0, "brevity": 0.5}),
    ("extract-name", "Maria went to the market.", {"accuracy": 1.0, "brevity": 0.0}),
    ("extract-name", "Susi Maria.", {"accuracy": 0.0, "brevity": 0.5}),
    ("capital-japan", "", {"accuracy": 0.0, "brevity": 0.0}),
])
def test_the_rules(name, text, parts):
    task = BY_NAME[name]
    assert task.score(text) == parts
    assert task.reward(text) == sum(parts.values())


def test_rules_are_plain_functions_of_the_text():
    task = Task("t", "q", "x", (mentions("x", weight=2.0), at_most_words(1)))
    assert task.score("y x") == {"accuracy": 2.0, "brevity": 0.0} and task.score("x") == {"accuracy": 2.0, "brevity": 0.5}
    assert mentions("x", weight=2.0)("a x b") == 2.0 and first_word_is("y")("Y, then") == 1.0
    assert at_most_words(1)("one") == 0.5 and at_most_words(1)("one two") == 0.0
