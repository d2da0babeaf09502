"""Graph node labels: display names (views/meaning.py) wrapped, and boxes sized to hold them."""
from __future__ import annotations

import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.snapshot import load_snapshot
from app.views.graph import LABEL_CHAR_PX, MONO_CHAR_PX, TEXT_INSET, build_graph_view, wrap_label
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
    if len(lines) == 2:  # broken only where one line would not fit the room
        assert len(" ".join(text.split())) * LABEL_CHAR_PX > room


def test_every_seed_node_is_drawn_with_its_display_name_and_keeps_its_id():
    seed = load_snapshot(SEED)
    modules = [m.node_id for m in seed.modules]
    graph = build_graph_view(seed, modules, [])
    for n in graph.nodes:
        assert n.display_name == node_meaning(seed, n.id).display_name != n.id
        assert n.label == n.id
        # the box holds every line at its CSS size: nothing is squeezed (no textLength) or cut
        room = n.width - 2 * TEXT_INSET - (30 if n.has_toggle else 0)
        assert all(len(line.text) * LABEL_CHAR_PX <= room for line in n.label_lines), n.id
        assert len(n.short_label) * MONO_CHAR_PX <= room, n.id


def test_long_names_widen_their_box_or_wrap():
    seed = load_snapshot(SEED)
    graph = build_graph_view(seed, [m.node_id for m in seed.modules], [])
    widths = {n.id: n.width for n in graph.nodes}
    assert widths["reference_policy"] > 150   # "Reference policy π_ref" and its ±
    assert all(len(n.label_lines) <= 2 for n in graph.nodes)
