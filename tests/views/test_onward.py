"""Where a walkthrough's last step leads (issue 49, item 10): on in the featured order, then the reader's own run;
a series' walkthrough (a run's recorded step) to its next one, then back to the series' page; never back to an
earlier chapter. And the tab's title: the step's point first, never the export's title."""
from __future__ import annotations

from dataclasses import replace

import pytest
from snapshots import other_snapshot

from app.domain.snapshot import parse_snapshot
from app.views.screen import UPLOAD, Link, PartOf, build_view_only_screen
from app.views.view_state import ViewState
from app.views.walkthrough_list import ListedWalkthrough


@pytest.fixture(scope="module")
def screen():
    snapshot = parse_snapshot(other_snapshot(), source="other.json")
    step = snapshot.steps[-1].id
    state = ViewState.parse(snapshot, "here", step, expanded=None, node=None, view=None, own=None)
    return build_view_only_screen(snapshot, state)


def listed(current: str, *, builtin: tuple[str, ...] = ("a", "b", "c"), uploads: tuple[str, ...] = ("u",),
           broken: tuple[str, ...] = ()) -> list[ListedWalkthrough]:
    """The catalog's list as list_walkthroughs orders it: the featured by rank, then the rest."""
    return [ListedWalkthrough(w, f"Walkthrough {w}", "", f"/walkthroughs/{w}", 3, "bad" if w in broken else None,
                              w == current, f"/walkthroughs/{w}/steps/first", w in builtin)
            for w in (*builtin, *uploads)]


@pytest.mark.parametrize(("current", "leads_to"), [("a", "/walkthroughs/b/steps/first"),
                                                   ("b", "/walkthroughs/c/steps/first"),
                                                   ("c", UPLOAD.url)])
def test_the_featured_lead_on_in_their_order_then_to_your_own_run(screen, current, leads_to):
    on = screen.onward(listed(current))
    assert on is not None and on.url == leads_to
    assert on.url != "/walkthroughs/a/steps/first"


def test_a_broken_next_one_is_passed_over_and_an_upload_starts_the_story(screen):
    assert screen.onward(listed("a", broken=("b",))).url == "/walkthroughs/c/steps/first"
    assert screen.onward(listed("u")).url == "/walkthroughs/a/steps/first"
    assert screen.onward(listed("c", broken=())).label == "your own run or snapshot"


def test_a_series_leads_to_its_next_walkthrough_then_back_to_its_page(screen):
    home = Link("the series", "/series/1", "Go back")
    nxt = Link("the next one", "/walkthroughs/n", "Go on")
    assert replace(screen, part_of=PartOf("One of a series", home, None, nxt)).onward(listed("u")) == nxt
    assert replace(screen, part_of=PartOf("One of a series", home)).onward(listed("u")) == home


def test_the_tab_title_starts_with_the_point_and_names_the_walkthrough(screen):
    title = screen.tab_title(listed("here", builtin=("here",)))
    assert title == f"{screen.headline} — Walkthrough here · GRPO walkthrough"
    assert screen.tab_title().endswith(f"— {screen.snapshot.collaboration.walkthrough.title} · GRPO walkthrough")
