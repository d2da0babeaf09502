"""Every kind keeps each role in the same file (docs/reference/layout.md, docs/design.md §5 "How to add a
kind"): whoever opens a kind they have not read finds its id, its step, its URL state and its pages where
they found the last kind's. Only the house's kinds list is imported; the rest is files on disk."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from app.house import KINDS

# relative path under app/kinds/<kind id>/ -> the role that file holds in every kind
ROLES = {
    "domain/kind_id.py": "the kind's id (KIND_ID), stored on its catalog entries; the only place it is written",
    "engine/params.py": "the step's parameters, validated (the form's and the URL's)",
    "engine/export_target.py": "the torch model the exporter traces into the kind's walkthrough file",
    "engine/step.py": "the kind's one-step computation (the GRPO step it shows, run or recomputed)",
    "views/url_state.py": "the kind's part of the URL state (its KindState): read from and written to the query",
    "views/screen.py": "the step page's screen: the shared graph screen plus the kind's panels",
    "views/story.py": "what each step teaches (the steps' stories)",
    "views/meaning.py": "what each node means (the kind's describer)",
    "views/urls.py": "the kind's own links (its endpoints), built in one place",
    "web/kind.py": "the manifest (KIND) the house registers",
    "web/api.py": "the kind's JSON API",
    "web/pages.py": "the kind's step page (the manifest's step_page)",
}
# The names these roles had before they were the same everywhere: none may come back.
OLD_NAMES = ("engine/grpo_step.py", "engine/token_walkthrough.py", "engine/recompute.py",
             "views/view_state.py", "views/query.py", "views/record_query.py")
KINDS_DIR = Path(importlib.import_module("app.kinds").__file__).parent
DEFINES_KIND_ID = re.compile(r"^\s*KIND_ID\s*(?::[^=\n]*)?=", re.MULTILINE)


def _package(kind) -> str:
    """The kind's package, from where its step page lives: app.kinds.<folder>."""
    module = kind.step_page.__module__
    assert module.startswith("app.kinds."), f"{kind.id}'s step page lives outside app/kinds: {module}"
    return ".".join(module.split(".")[:3])


STEP_KINDS = [k for k in KINDS if k.step_page is not None]  # the runs (a sibling of the kinds) have none


def test_every_kind_folder_is_a_kind_with_a_step_page():
    """The table below covers every folder under app/kinds, and each folder is named by its kind's id."""
    assert STEP_KINDS
    folders = {p.name for p in KINDS_DIR.iterdir() if (p / "__init__.py").is_file()}
    assert {_package(k).rsplit(".", 1)[1] for k in STEP_KINDS} == folders
    for kind in STEP_KINDS:
        assert _package(kind) == f"app.kinds.{kind.id}"


@pytest.mark.parametrize("kind", STEP_KINDS, ids=lambda k: k.id)
def test_each_role_has_the_same_file_in_every_kind(kind):
    root = KINDS_DIR / _package(kind).rsplit(".", 1)[1]
    missing = [f"{path} ({role})" for path, role in ROLES.items() if not (root / path).is_file()]
    assert not missing, f"{kind.id} lacks: {'; '.join(missing)}"
    left = [path for path in OLD_NAMES if (root / path).exists()]
    assert not left, f"{kind.id} still has the old names {left}: {', '.join(ROLES)} are the roles' files"


@pytest.mark.parametrize("kind", STEP_KINDS, ids=lambda k: k.id)
def test_kind_id_is_the_manifests_id(kind):
    assert importlib.import_module(f"{_package(kind)}.domain.kind_id").KIND_ID == kind.id


def test_kind_id_is_written_in_one_place_per_kind():
    """No module of a kind but its domain/kind_id.py defines KIND_ID: the others import it."""
    defining = sorted(str(p.relative_to(KINDS_DIR)) for p in KINDS_DIR.rglob("*.py")
                      if DEFINES_KIND_ID.search(p.read_text(encoding="utf-8")))
    assert defining == sorted(f"{_package(k).rsplit('.', 1)[1]}/domain/kind_id.py" for k in STEP_KINDS)
