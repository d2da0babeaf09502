"""Graph node labels: display names (views/meaning.py) wrapped into the 150-unit boxes."""
from __future__ import annotations

import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.snapshot import load_snapshot
from app.views.graph import LABEL_CHAR_PX, build_graph_view, wrap_label
from app.views.meaning import node_meaning

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEED = ROOT / "walkthroughs" / "toy_grpo.tensorviz.json"


@pytest.mark.parametrize("text, room, lines", [
    ("Policy ratio ρ", 130, ["Policy ratio ρ"]),
    ("Policy ratio ρ", 106, ["Policy", "ratio ρ"]),
    ("Reference policy π_ref", 106, ["Reference", "policy π_ref"]),
    ("Log-probabilities log π_θ", 130, ["Log-probabilities", "log π_θ"]),
    ("The clipped-surrogate expression", 130, ["The clipped-", "surrogate expression"]),
    ("x", 106, ["x"]),
])
def test_wrap_label(text, room, lines):
    assert [line.text for line in wrap_label(text, room)] == lines


@given(st.text(min_size=1, max_size=80), st.floats(min_value=10, max_value=400))
def test_wrap_label_keeps_every_character_in_at_most_two_lines(text, room):
    lines = wrap_label(text, room)
    assert 1 <= len(lines) <= 2
    joined = "".join(line.text for line in lines)
    assert joined.replace(" ", "") == "".join(text.split())
    for line in lines:   # an overrunning line is squeezed to the room, never left to spill
        assert (line.squeeze == room) == (len(line.text) * LABEL_CHAR_PX > room)


def test_every_seed_node_is_drawn_with_its_display_name_and_keeps_its_id():
    seed = load_snapshot(SEED)
    modules = [m.node_id for m in seed.modules]
    graph = build_graph_view(seed, modules, [])
    for n in graph.nodes:
        assert n.display_name == node_meaning(seed, n.id).display_name != n.id
        assert n.label == n.id
