"""UNIPO's canonical fixture (tests/fixtures/unipo_canonical.json) and its generator, for the tests
that read it (tests/kinds/step_record/test_unipo.py and test_unipo_objective.py)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIXTURE = FIXTURES / "unipo_canonical.json"


def fixture_script():
    """tests/fixtures/make_unipo_fixture.py, loaded by its path (tests/fixtures is no package)."""
    spec = importlib.util.spec_from_file_location("make_unipo_fixture", FIXTURES / "make_unipo_fixture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_fixture() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))
