"""Issue 49 (items 6 and 11), at 390x844, 1280x720 and 1920x1080:

- a number never wraps inside itself in the real model's update and sample tables or the tiny LM's
  token and completion tables ("−0.2 / 864", "afte / r", "5+9=1 / 4" before), a tiny LM completion
  wraps only between its tokens (never inside a tag, <think>, or a number, 14 or the second script's
  "be"), a glossary term never wraps inside
  itself nor away from the characters written against it ("[1 − ε / , 1 + ε]", "token / 's"), at the
  page's width and with its paragraph at its narrowest (min-content: where any width could break it):
  each measured with Range.getClientRects() (one line box: not broken); and no page scrolls sideways;
- the real model's blocks figure labels every bar with its block's index (the largest three with their
  value too, every value on hover), and its attention map labels every row with its token and every
  k-th column (k = 1 while a cell is as wide as a line of label text) with the token at that position,
  readable (11 px at least), inside a box of its own that may scroll sideways.

The real model runs on the suite's tiny GGUF (tests/conftest.py): the module POSTs its step once.
"""
from __future__ import annotations

import urllib.request

import pytest
from browser_helpers import wait_settled

pytestmark = pytest.mark.browser

SIZES = {"390x844": (390, 844), "1280x720": (1280, 720), "1920x1080": (1920, 1080)}
SMOL = "/walkthroughs/smollm_grpo"
QUERY = "group_size=4&max_new_tokens=12"
TINY = "/walkthroughs/tiny_lm_grpo"
NO_SIDEWAYS_SCROLL = "() => document.scrollingElement.scrollWidth <= window.innerWidth"

# Pages and what on them must not break inside: numbers (in the tables and the token cells), header
# words, completion units (macros/tokens.html unbroken), and every glossary term with its glue.
PAGES = {
    f"{SMOL}/steps/update?{QUERY}": {"numbers": "#moved-tokens table", "words": "#moved-tokens thead th"},
    f"{SMOL}/steps/sample?{QUERY}": {"numbers": "#group-answers td:not(.answer-text)", "words": "#group-answers thead th"},
    f"{TINY}/steps/sample": {"numbers": ".completions .tok-num, .completion-head .num"},
    f"{TINY}/steps/advantages": {"numbers": "#detail-rewards", "units": "#detail-rewards code"},
    f"{TINY}/steps/aggregation": {"numbers": "#detail-aggregation"},
    f"{TINY}/steps/update": {"numbers": "#detail-update", "units": "#detail-update code"},
}

# Each piece (a number found in the text, a header word, a completion's token unit, a term with its
# glue) that lies on more than one line: its text. A piece's line boxes are its Range's client rects,
# merged where they share a line (a piece across <code> and <small> gives a rect each).
BROKEN = """([kind, sel]) => {
  const lines = range => {
    const rows = [];
    for (const r of range.getClientRects()) {
      if (r.width < 0.5 || r.height < 0.5) continue;
      const row = rows.find(o => Math.min(o.bottom, r.bottom) - Math.max(o.top, r.top) > Math.min(o.height, r.height) / 2);
      if (row) { row.top = Math.min(row.top, r.top); row.bottom = Math.max(row.bottom, r.bottom); }
      else rows.push({top: r.top, bottom: r.bottom, height: r.height});
    }
    return rows.length;
  };
  const out = [], checked = [0];
  const pieces = (root, re) => {
    const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    let n;
    while ((n = walk.nextNode())) {
      if (n.parentElement.closest('.visually-hidden, [popover], title')) continue;
      let m; re.lastIndex = 0;
      while ((m = re.exec(n.textContent))) {
        const r = document.createRange(); r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
        checked[0]++;
        if (lines(r) > 1) out.push(m[0]);
      }
    }
  };
  const whole = el => { const r = document.createRange(); r.selectNodeContents(el); checked[0]++;
                        if (lines(r) > 1) out.push(el.textContent.replace(/\\s+/g, ' ').trim()); };
  // A term with the characters written against it ("(ρ)", "ε,", "token's"): its range, from the last space
  // before it to the first space after it (what a reader takes for one word).
  const glued = b => {
    const r = document.createRange(); r.setStartBefore(b); r.setEndAfter(b);
    const text = n => n && n.nodeType === 3 ? n : null;
    let before = b.previousSibling, after = b.nextSibling;
    if (b.parentElement.classList.contains('term-glue')) { before = b.parentElement.previousSibling; after = b.parentElement.nextSibling;
                                                          r.setStartBefore(b.parentElement); r.setEndAfter(b.parentElement); }
    const head = text(before) && before.textContent.match(/\\S+$/), tail = text(after) && after.textContent.match(/^\\S+/);
    if (head) r.setStart(before, before.textContent.length - head[0].length);
    if (tail && !after.parentElement.closest('[popover]')) r.setEnd(after, tail[0].length);
    return r;
  };
  if (kind === 'terms' || kind === 'terms-narrowest') {
    // at the page's own width; and with each term's paragraph as narrow as it can be (min-content: every
    // place a line may break, breaks), so no width anywhere breaks a term or its glue
    for (const b of document.querySelectorAll(sel)) {
      const block = b.closest('p, li, dd, figcaption, caption, td, th, div');
      const old = block.style.width;
      if (kind === 'terms-narrowest') block.style.width = 'min-content';
      const r = glued(b); checked[0]++;
      if (lines(r) > 1) out.push(r.toString());
      block.style.width = old;
    }
    return {broken: out, checked: checked[0]};
  }
  for (const root of document.querySelectorAll(sel)) {
    if (kind === 'numbers') pieces(root, /[−+\\-]?\\d[\\d.,]*(?:e[−+\\-]?\\d+)?/g);
    else if (kind === 'words') pieces(root, /\\S+/g);
    else if (kind === 'units') pieces(root, /<[^<>]+>|[0-9A-Za-z]+/g);   // a tag, a number (either script)
    else whole(root);
  }
  return {broken: out, checked: checked[0]};
}"""


@pytest.fixture(scope="module")
def base_url(repo_base_url) -> str:
    """The repository's walkthroughs, with the real model's step for QUERY computed (POSTed as its Run does)."""
    request = urllib.request.Request(f"{repo_base_url}{SMOL}/steps/sample?{QUERY}", method="POST")
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200
    return repo_base_url


def open_page(page, path: str) -> None:
    page.goto(path)
    if path.startswith(SMOL):   # the progress box opens the finished page
        page.wait_for_selector("#smol-model q", timeout=120_000)
    wait_settled(page)


@pytest.mark.parametrize("size", list(SIZES))
def test_no_number_term_or_token_wraps_inside_itself_and_nothing_scrolls_sideways(make_context, shot, size):
    width, height = SIZES[size]
    page = make_context(viewport={"width": width, "height": height}).new_page()
    failures, counts = [], {}
    for path, parts in PAGES.items():
        open_page(page, path)
        for kind, selector in [*parts.items(), ("terms", ".term"), ("terms-narrowest", ".term")]:
            found = page.evaluate(BROKEN, [kind, selector])
            counts[(path, kind)] = found["checked"]
            if found["broken"]:
                failures.append(f"{size} {path}: {kind} broken across lines: {found['broken'][:12]}"
                                f" ({len(found['broken'])} of {found['checked']})")
        if not page.evaluate(NO_SIDEWAYS_SCROLL):
            failures.append(f"{size} {path}: the page scrolls sideways "
                            f"({page.evaluate('document.scrollingElement.scrollWidth')} > {width})")
        if path.startswith(f"{SMOL}/steps/update") or path == f"{TINY}/steps/update":
            shot(page, path.split("/")[2] + "-update")
    assert not failures, "\n".join(failures)
    # what was measured is there: numbers in every table, completion units, and terms on the pages
    assert all(counts[(path, "numbers")] > 0 for path in PAGES), counts
    assert counts[(f"{TINY}/steps/update", "units")] > 0 and sum(counts[(p, "terms")] for p in PAGES) > 0, counts


# The blocks figure: per bar, its row's label and value text, the rect's <title>, and where the label sits.
BLOCK_LABELS = """() => Array.from(document.querySelectorAll('#block-gradients .block-row')).map(row => {
  const bar = row.querySelector('rect.bar'), label = row.querySelector('.block-label');
  const lb = label.getBoundingClientRect(), bb = row.querySelector('svg').getBoundingClientRect();
  return {label: label.textContent.trim(), value: row.querySelector('.block-value').textContent.trim(),
          title: bar.querySelector('title').textContent, other: bar.classList.contains('other'), top: bar.classList.contains('top'),
          px: parseFloat(getComputedStyle(label).fontSize), beside: lb.right <= bb.left + 0.5
            && lb.bottom > bb.top && lb.top < bb.bottom};
})"""

# The attention map: its row and column labels (text, on-screen size), its rows and columns, its box.
ATTENTION_LABELS = """() => {
  const svg = document.querySelector('#attention-heads svg.smol-attention-map');
  const size = t => parseFloat(getComputedStyle(t).fontSize) * svg.getScreenCTM().a;
  const labels = sel => Array.from(svg.querySelectorAll(sel)).map(t => ({text: t.textContent.replace(t.querySelector('title')?.textContent || '', ''),
                                                                          px: size(t)}));
  const box = svg.closest('.smol-attention-scroll');
  return {rows: labels('.row-labels text'), columns: labels('.col-labels text'),
          cells: +svg.getAttribute('aria-label').match(/(\\d+) rows by (\\d+)/)[1],
          positions: +svg.getAttribute('aria-label').match(/(\\d+) rows by (\\d+)/)[2],
          box: box && {scrolls: getComputedStyle(box).overflowX, width: box.getBoundingClientRect().width,
                       region: box.getAttribute('role'), tab: box.tabIndex}};
}"""


@pytest.mark.parametrize("size", list(SIZES))
def test_the_blocks_bars_and_the_attention_map_carry_their_labels(make_context, shot, size):
    width, height = SIZES[size]
    page = make_context(viewport={"width": width, "height": height}).new_page()
    open_page(page, f"{SMOL}/steps/blocks?{QUERY}")
    rows = page.evaluate(BLOCK_LABELS)
    blocks = [r for r in rows if not r["other"]]
    assert rows, "the blocks figure has no labelled bar"
    assert len(blocks) == 13 and [r["label"] for r in blocks] == [str(i) for i in range(13)], rows
    assert all(r["beside"] and r["px"] >= 11 for r in rows), rows   # every bar's label at its left, readable
    assert all(r["title"].startswith(f"block {r['label']}: ") for r in blocks), rows   # the value on hover
    # the largest three carry their value as text (the tiny GGUF's tied group has no gradient, so none is
    # largest: tests/kinds/smollm/test_second_look_figures.py renders a step with one)
    top = [r for r in blocks if r["top"]]
    assert len(top) <= 3 and all(r["value"] and r["title"].endswith(r["value"]) for r in top), rows
    assert top or page.locator("#no-gradient").count() == 1
    assert [r["label"] for r in rows if r["other"]] == ["embed", "norm"] and all(r["value"] for r in rows if r["other"])
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    shot(page, "blocks")

    open_page(page, f"{SMOL}/steps/attention?{QUERY}")
    att = page.evaluate(ATTENTION_LABELS)
    assert att["rows"] and att["columns"], f"the attention map has no token labels: {att}"
    assert att["cells"] > 0 and len(att["rows"]) == att["cells"], att   # every row labelled
    assert att["rows"][0]["text"] == "(prompt end)" and all(r["text"] for r in att["rows"]), att["rows"]
    # every column labelled (cells 12 px wide hold an 11 px line: k = 1)
    assert len(att["columns"]) == att["positions"] and all(c["text"] for c in att["columns"]), att["columns"]
    assert min(t["px"] for t in att["rows"] + att["columns"]) >= 11 - 0.01, att
    assert att["box"] and att["box"]["scrolls"] == "auto" and att["box"]["region"] == "region" and att["box"]["tab"] == 0
    assert att["box"]["width"] <= width and page.evaluate(NO_SIDEWAYS_SCROLL)
    page.locator("#attention-heads").scroll_into_view_if_needed()
    shot(page, "attention")
