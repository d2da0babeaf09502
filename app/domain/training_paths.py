"""The three training paths of DeepSeek-R1 (arXiv 2501.12948 §2.2–2.4), one concept for every kind.

Each kind runs them at its own scale (from its own plans), but the ids, the URL key that chooses one and
the old spellings that redirect are these, so a link names a path the same way on every page.
"""
from __future__ import annotations

from dataclasses import dataclass

URL_KEY = "process"  # ?process=r1-zero chooses a path on any walkthrough's page


@dataclass(frozen=True)
class TrainingPath:
    id: str
    title: str  # the paper's name
    paper_section: str


PATHS = (
    TrainingPath("r1-zero", "DeepSeek-R1-Zero", "§2.2"),
    TrainingPath("r1", "DeepSeek-R1", "§2.3"),
    TrainingPath("distillation", "Distillation", "§2.4"),
)
PATH_IDS = tuple(p.id for p in PATHS)

# Spellings links used before the paths were one concept (one kind's own ids and URL key):
# each still answers, with a redirect to the canonical URL.
RENAMED_IDS = {"r1_zero": "r1-zero"}
OLD_URL_KEYS = ("path",)


def canonical_path_id(raw: str) -> str:
    """A path id as links write it now: old spellings renamed, anything else unchanged (so a wrong
    id is refused by whoever looks it up, naming what was typed)."""
    return RENAMED_IDS.get(raw, raw)


@dataclass(frozen=True)
class PathChoice:
    """One path offered by a kind's selector: where choosing it leads, and whether it is shown."""
    id: str
    title: str
    url: str
    selected: bool
