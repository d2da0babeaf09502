"""Issue 49 (item 11), without a browser: the real model's blocks figure labels every bar with its block's
index and the three largest with their value (every value in its bar's <title>); its attention map labels
every row with its answer token and every column with the token at that position, a token's spaces and
newlines made visible (SVG text collapses them) and long tokens cut with … (the whole in a <title>).
The suite's tiny GGUF gives a tied group, so no bar is largest there: the figures are rendered here from
made-up numbers (tests/browser/test_second_look_layout.py measures the labels in Chromium)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup

from app.kinds.smollm.views import figures
from app.kinds.smollm.views.figures import AttentionFigure, Bar, BlockFigure, token_label
from app.views.numbers import readout


@pytest.fixture(scope="module")
def render(make_client):
    templates = make_client().app.state.context.templates  # an app of the house's: its kinds' template folders

    template = templates.env.get_template("smollm/figures.html")

    def draw(focus: str, figure) -> BeautifulSoup:
        recorded = SimpleNamespace(device="cpu", prompt_text="What is 2+2?", stage_seconds={"step": 1.0}, peak_rss_mb=None)
        screen = SimpleNamespace(model_label="a model", recorded=recorded, step_focus=focus, figure=lambda: figure,
                                 view_url=lambda **kw: "/x")
        return BeautifulSoup(template.render(screen=screen), "html.parser")
    return draw


def test_every_block_bar_has_its_index_and_the_largest_their_value(render):
    norms = [0.0, 3.0, 1.0, 2.0, 0.5, 0.25]
    blocks = tuple(Bar(str(i), g, 100 * g / 4.0) for i, g in enumerate(norms))
    others = (Bar("embed", 4.0, 100.0), Bar("norm", 0.125, 3.125))
    page = render("block-gradients", BlockFigure(blocks, others, 5.5, (1, 3, 2), False))
    rows = page.select("#block-gradients .block-row")
    assert [r.select_one(".block-label").get_text() for r in rows] == ["0", "1", "2", "3", "4", "5", "embed", "norm"]
    shown = {r.select_one(".block-label").get_text(): r.select_one(".block-value").get_text() for r in rows}
    assert shown == {"0": "", "1": readout(3.0), "2": readout(1.0), "3": readout(2.0), "4": "", "5": "",
                     "embed": readout(4.0), "norm": readout(0.125)}
    assert [r.select_one("rect.bar title").get_text() for r in rows[:6]] == [f"block {i}: {readout(g)}" for i, g in enumerate(norms)]
    assert len(page.select("rect.bar:not(.other)")) == 6 and len(page.select(".block-row.top")) == 3
    assert [li.get_text() for li in page.select(".block-values li")] == [readout(g) for g in norms]


def test_the_attention_map_labels_its_rows_and_columns_with_their_tokens():
    assert token_label("\n") == "↵" and token_label(" capital") == "␣capital" and token_label("a ") == "a␣"
    assert token_label("") == "∅" and token_label("<|im_start|>") == "<|im_start|>"
    assert token_label("abcdefghijklmnop") == "abcdefghijk…"


def test_the_attention_map_draws_every_label(render):
    prompt = ("<|im_start|>", "user", "\n", "Hi", "<|im_end|>", "\n")
    answer = (" Hello", "!", "\n")
    cells = tuple(tuple(1.0 if c <= 5 + r else 0.0 for c in range(8)) for r in range(3))
    fig = AttentionFigure(4, 0, 1, 2, 2, 8, 6, ("(prompt end)", " Hello", "!"), cells, (0.5, 0.25),
                          (*prompt, *answer[:2]))
    page = render("attention-heads", fig)
    svg = page.select_one("#attention-heads svg.smol-attention-map")
    rows = [t.contents[-1].strip() for t in svg.select(".row-labels text")]
    assert rows == ["(prompt end)", "␣Hello", "!"]
    columns = [t.contents[-1].strip() for t in svg.select(".col-labels text")]
    assert columns == ["<|im_start|>", "user", "↵", "Hi", "<|im_end|>", "↵", "␣Hello", "!"]
    assert [t.select_one("title").get_text() for t in svg.select(".col-labels text")][2] == "position 2: \n"
    assert fig.column_step == 1 and float(svg["width"]) == fig.width and float(svg["height"]) == fig.height
    # the labels sit outside the map: rows to its left, columns above it
    assert all(float(t["x"]) < fig.left for t in svg.select(".row-labels text"))
    assert all(float(t["y"]) < fig.top for t in svg.select(".col-labels text"))
    box = svg.find_parent("div")
    assert "smol-attention-scroll" in box["class"] and box["role"] == "region" and box["tabindex"] == "0"
    assert figures.CELL_W >= figures.LABEL_PX  # a column is as wide as a line of its label
