"""The real model's built-in prompts and their rule rewards (issue 33): pure Python, no torch.

SmolLM2-135M-Instruct is weak: it gets "17 + 25" wrong, names Paris for "capital of France" in about
3 of 8 samples, and never writes the <answer> tags R1's format reward asks for. A GRPO step learns
only from a group whose rewards differ (equal rewards: every advantage is 0), so each prompt here is
one the model answers right *sometimes*, and each reward is a sum of named parts (accuracy, brevity,
format), each a rule a reader can check by eye, like DeepSeek-R1's rule rewards (§2.2: accuracy and
format, no learned reward model). The spread each prompt's groups reach on the real model at
temperature 0.8, G = 8, 48 new tokens is measured in tests/kinds/smollm/test_tasks.py's docstring.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_WORD = re.compile(r"[A-Za-z0-9']+")


def words(text: str) -> list[str]:
    return _WORD.findall(text)


@dataclass(frozen=True)
class RewardPart:
    name: str  # accuracy, brevity, format, ...
    rule: Callable[[str], float]  # completion text -> the part's value
    pays: str  # one plain sentence: what it pays and why

    def __call__(self, completion: str) -> float:
        return float(self.rule(completion))


@dataclass(frozen=True)
class Task:
    name: str
    text: str  # the user's message; the chat template wraps it
    answer: str
    parts: tuple[RewardPart, ...]

    def score(self, completion: str) -> dict[str, float]:
        """Each part's value, in the order of `parts`."""
        return {part.name: part(completion) for part in self.parts}

    def reward(self, completion: str) -> float:
        return sum(self.score(completion).values())

    @property
    def part_names(self) -> tuple[str, ...]:
        return tuple(part.name for part in self.parts)


# -- rules -------------------------------------------------------------------------------------------

def mentions(answer: str, *, weight: float = 1.0) -> RewardPart:
    """accuracy: the answer appears as a whole word (any case)."""
    pattern = re.compile(rf"(?<![A-Za-z0-9]){re.escape(answer)}(?![A-Za-z0-9])", re.IGNORECASE)
    return RewardPart("accuracy", lambda text: weight if pattern.search(text) else 0.0,
                      f"{weight:g} when the reply contains '{answer}' as a word: the right answer, wherever it is.")


def first_word_is(answer: str, *, weight: float = 1.0) -> RewardPart:
    """accuracy: the reply starts with the answer (a reply that buries it in a sentence earns nothing)."""
    target = answer.lower()
    return RewardPart("accuracy", lambda text: weight if [w.lower() for w in words(text)[:1]] == [target] else 0.0,
                      f"{weight:g} when the reply's first word is '{answer}': the answer first, as asked.")


def at_most_words(limit: int, *, weight: float = 0.5) -> RewardPart:
    """brevity: the whole reply is at most `limit` words."""
    return RewardPart("brevity", lambda text: weight if 0 < len(words(text)) <= limit else 0.0,
                      f"{weight:g} when the reply has 1 to {limit} words: the prompt asks for a short answer, "
                      "and a rambling one is where a small model goes wrong.")


# -- the prompts -------------------------------------------------------------------------------------

def _short_answer(name: str, text: str, answer: str) -> Task:
    return Task(name, text, answer, (mentions(answer), at_most_words(8)))


TASKS: tuple[Task, ...] = (
    _short_answer("capital-france", "What is the capital of France? Answer in one word.", "Paris"),
    _short_answer("add-3-4", "What is 3 + 4? Answer with the number only.", "7"),
    _short_answer("opposite-hot", "What is the opposite of hot? Answer in one word.", "cold"),
    _short_answer("spider-legs", "How many legs does a spider have? Answer with a number.", "8"),
    Task("extract-name", "Extract the name from this sentence and reply with the name only: "
                         "Yesterday, Maria went to the market.", "Maria", (first_word_is("Maria"), at_most_words(2))),
    _short_answer("capital-japan", "What is the capital of Japan? Answer in one word.", "Tokyo"),
)
