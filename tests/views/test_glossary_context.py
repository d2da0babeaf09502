"""Words that resolve to the right term: a symbol with two meanings opens the definition of the one
its sentence means. The advantage's ε (the small number added to the group's standard deviation) is
not the clip range's ε; the table below is every context the app writes ε in."""
from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from app.views.glossary import annotate

# (sentence, the word as written, the term it must open)
BY_CONTEXT = [
    ("The toy uses population standard deviation plus epsilon, so an equal-reward group has zero advantages",
     "epsilon", "std-epsilon"),
    ("A_i = (r_i − mean(r)) / (std_pop(r) + ε_A)", "ε_A", "std-epsilon"),
    ("A = (r − mean) ÷ (population std + ε)", "ε", "std-epsilon"),
    ("divide by σ + ε", "ε", "std-epsilon"),
    ("it leaves [1 − ε, 1 + ε] in the direction its advantage pushes, the clip binds", "ε", "epsilon"),
    ("the clip range epsilon is 0.2", "epsilon", "epsilon"),
    ("ε = 0.2 by default", "ε", "epsilon"),
]


@pytest.mark.parametrize("sentence, word, key", BY_CONTEXT)
def test_each_use_of_epsilon_opens_its_own_definition(sentence, word, key):
    marked = [(s.text, s.term.key) for s in annotate([sentence])[0] if s.term is not None]
    assert (word, key) in marked, marked


def test_both_meanings_on_one_page_each_get_their_definition():
    std, clip = annotate(["The std plus epsilon keeps the division finite.",
                          "The ratio stays in [1 − ε, 1 + ε]."])
    assert [s.term.key for s in std if s.term] == ["std-epsilon"]
    assert "epsilon" in [s.term.key for s in clip if s.term]


def test_the_advantages_step_opens_the_std_epsilon(make_client):
    """The step's own note says "standard deviation plus epsilon": its ε button opens the advantage's ε,
    and the popover says so (before: the clip range's band [1 − ε, 1 + ε])."""
    page = BeautifulSoup(make_client().get("/walkthroughs/toy_grpo/steps/advantages").text, "html.parser")
    buttons = [b for b in page.select("button.term") if b.get_text() in ("epsilon", "ε")]
    assert buttons, "the advantages step marks its epsilon"
    definition = page.find(id=buttons[0]["popovertarget"]).get_text()
    assert "standard deviation" in definition and "[1 − ε, 1 + ε]" not in definition
