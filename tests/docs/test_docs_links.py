"""The README is the front door, docs/ the house behind it (issue 30).

- every relative link in README.md, docs/**/*.md and bench/*.md points to a file that exists, and
  every `#anchor` (in the page, or on another .md) names a heading of that page;
- the MkDocs site (mkdocs.yml) builds with `--strict`: a broken link, a broken anchor or a page left
  out of the nav fails the build;
- the README stays short (at most 200 lines) and every docs page is one link away from it, or from
  docs/index.md, which it links;
- mkdocs.yml names no font, script or stylesheet host: the site, like the app, works with no network.

The Markdown is read by a small parser, on purpose not a Markdown library, so that what counts as a
link is written down here:

- fenced code blocks (``` or ~~~, indented or not) and inline code spans (`...`) are blanked out
  first: a link written inside code is an example, not a link;
- a link is `[text](target)` or `![alt](target)` (an optional "title" after the target is
  allowed), or a reference definition `[label]: target` at the start of a line; the text may run
  over lines but may not contain `]`;
- a target with a scheme (`https:`, `mailto:`) is outside the repository and not followed (there
  is no network here); a target starting with `/` is refused, since it means the web server's root
  to a browser and the disk's root to a reader of the files;
- headings are ATX headings (`#` to `######`), outside code; their anchors are GitHub's slugs, which
  mkdocs.yml asks MkDocs to use too (pymdownx.slugs, lowercase): the heading's text without its
  Markdown (links keep their text, code spans their content), lowercased, every character that is
  not a letter, digit, `_`, `-` or space dropped, each space turned into `-`; a repeated slug gets
  `-1`, `-2`, ... as GitHub gives it.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pytest
from paths import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
DOCS_INDEX = DOCS / "index.md"
MKDOCS_YML = ROOT / "mkdocs.yml"
MAX_README_LINES = 200


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md")), *sorted((ROOT / "bench").glob("*.md"))]


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# -- the parser --------------------------------------------------------------------------------

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.DOTALL)  # never across a blank line
INLINE_LINK = re.compile(r"!?\[(?P<text>[^\]]*)\]\(\s*(?P<target><[^>\n]*>|[^)\s]+)(?:\s+\"[^\"\n]*\")?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]\n]+\]:\s*(?P<target><[^>\n]*>|\S+)", re.MULTILINE)
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(?P<text>.*?)(?:[ \t]+#+)?[ \t]*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def blank(match: re.Match[str]) -> str:
    """The matched text as spaces, its newlines kept, so line numbers stay right."""
    return re.sub(r"[^\n]", " ", match.group(0))


def without_fences(text: str) -> str:
    """The text with fenced code blocks blanked out (their lines kept, empty)."""
    lines, fence = [], None
    for line in text.split("\n"):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
            lines.append("")
        elif fence is not None:
            closing = FENCE.match(line)
            if closing and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= len(fence) \
                    and not line.strip()[len(closing.group(1)):].strip():
                fence = None
            lines.append("")
        else:
            lines.append(line)
    return "\n".join(lines)


def without_code(text: str) -> str:
    """The text with fenced blocks and inline code spans blanked out."""
    return CODE_SPAN.sub(blank, without_fences(text))


@dataclass(frozen=True)
class Link:
    source: Path
    line: int
    target: str


def links(path: Path, text: str | None = None) -> list[Link]:
    """Every link target of a Markdown file, outside code, with the line it starts on."""
    prose = without_code(path.read_text() if text is None else text)
    found = []
    for pattern in (INLINE_LINK, REFERENCE_DEFINITION):
        for match in pattern.finditer(prose):
            target = match.group("target").strip("<>")
            found.append(Link(path, prose.count("\n", 0, match.start()) + 1, target))
    return sorted(found, key=lambda link: link.line)


def github_slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")  # HTML tags go; code keeps its content
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())  # \w: Unicode letters, digits and _
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors GitHub (and MkDocs, as mkdocs.yml configures it) gives the headings of a page."""
    seen: dict[str, int] = {}
    slugs = set()
    for line in without_fences(text).split("\n"):  # a heading's code spans are part of its text
        heading = ATX_HEADING.match(line)
        if not heading:
            continue
        slug = github_slug(heading.group("text"))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        slugs.add(slug if count == 0 else f"{slug}-{count}")
    return slugs


def problems(path: Path, text: str | None = None) -> list[str]:
    """What is wrong with the links of one Markdown file, one line each ("file:line: target: why")."""
    found = []
    page_anchors = anchors(path.read_text() if text is None else text)
    for link in links(path, text):
        where = f"{rel(link.source)}:{link.line}: {link.target}"
        if SCHEME.match(link.target):
            continue  # outside the repository
        if link.target.startswith("/"):
            found.append(f"{where}: absolute path (a browser reads it from the server's root); use a relative one")
            continue
        file_part, _, fragment = link.target.partition("#")
        file_part, fragment = unquote(file_part), unquote(fragment)
        target = (link.source.parent / file_part).resolve() if file_part else link.source
        if file_part and not target.exists():
            found.append(f"{where}: no such file {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
            continue
        if not target.is_relative_to(ROOT):
            found.append(f"{where}: points outside the repository")
            continue
        if fragment and target.suffix == ".md":
            known = page_anchors if target == link.source else anchors(target.read_text())
            if fragment not in known:
                found.append(f"{where}: {rel(target)} has no heading with the anchor #{fragment} "
                             f"(its anchors: {', '.join(sorted(known)) or 'none'})")
    return found


# -- 1. links and anchors ------------------------------------------------------------------------

@pytest.mark.parametrize("path", markdown_files(), ids=rel)
def test_every_relative_link_and_anchor_resolves(path):
    assert not problems(path), "\n".join(problems(path))


def test_the_checker_catches_what_it_should_and_ignores_code(tmp_path, monkeypatch):
    """The parser on a page of known faults: without this, a parser that found nothing would pass."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "other.md").write_text("# Other page\n\n## Same name\n\n## Same name\n")
    page = tmp_path / "page.md"
    page.write_text("\n".join([
        "# A page: with `code`, punctuation — and Ünïcode",
        "[fine](other.md) [fine anchor](other.md#other-page) [second of two](other.md#same-name-1)",
        "[self](#a-page-with-code-punctuation--and-ünïcode) [web](https://example.org/x)",
        "[missing file](nowhere.md) [missing anchor](other.md#nope)",
        "[over",
        "two lines](#gone) [absolute](/walkthroughs)",
        "`[in code](nowhere-either.md)`",
        "```md",
        "[in a fence](nowhere-at-all.md)",
        "```",
        "![image](missing.png)",
        "[ref]: also-missing.md",
    ]))
    found = problems(page)
    assert [line.split(": ")[1] for line in found] == [
        "nowhere.md", "other.md#nope", "#gone", "/walkthroughs", "missing.png", "also-missing.md"], found
    assert found[0].startswith("page.md:4: ") and found[2].startswith("page.md:5: ")


def test_github_slugs():
    assert github_slug('Peer tests: TRL and verl') == "peer-tests-trl-and-verl"
    assert github_slug("4. The training paths (DeepSeek-R1 §2.2–2.4)") == "4-the-training-paths-deepseek-r1-2224"
    assert github_slug("2. The snapshot file (`tensorviz.graph` v3, schemaVersion 2)") == \
        "2-the-snapshot-file-tensorvizgraph-v3-schemaversion-2"
    assert github_slug("[Linked](x.md) and_under — dash") == "linked-and_under--dash"


# -- 2. the site ---------------------------------------------------------------------------------

def test_the_site_builds_with_strict(tmp_path):
    """mkdocs build --strict: any warning (a broken link or anchor, a page not in the nav) fails.
    mkdocs is in the test extra: if it is missing, this fails (it never skips)."""
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(MKDOCS_YML), "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    assert (site / "index.html").is_file() and (site / "images" / "walkthrough.png").is_file()
    # and the pages it wrote load nothing from another host: no font, stylesheet, script or image
    remote = re.compile(r"<(?:link|script|img)\b[^>]*\b(?:href|src)=[\"']?(?:https?:)?//", re.IGNORECASE)
    loading = [rel_page for page in site.rglob("*.html") if remote.search(page.read_text())
               for rel_page in [page.relative_to(site).as_posix()]]
    assert not loading, f"pages that load from another host: {loading}"


# -- 3. the front door ---------------------------------------------------------------------------

def linked_files(path: Path) -> set[Path]:
    return {(path.parent / unquote(link.target.partition("#")[0])).resolve()
            for link in links(path) if not SCHEME.match(link.target) and link.target.partition("#")[0]}


def test_the_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move the detail into docs/ (at most {MAX_README_LINES})"


def test_every_page_is_reachable_from_the_readme():
    """Each docs page (and the benchmark's README and history) is linked from README.md itself or
    from docs/index.md, the map, which the README links."""
    from_readme = linked_files(README)
    assert DOCS_INDEX.resolve() in from_readme, "README.md must link docs/index.md"
    reachable = from_readme | linked_files(DOCS_INDEX) | {DOCS_INDEX.resolve()}
    pages = {p.resolve() for p in DOCS.rglob("*.md")} | {ROOT / "bench" / "README.md", ROOT / "bench" / "HISTORY.md"}
    unreachable = sorted(rel(p) for p in pages - reachable)
    assert not unreachable, f"not linked from README.md or docs/index.md: {unreachable}"


# -- 4. no network -------------------------------------------------------------------------------

FONT_SCRIPT_CSS_HOST = re.compile(
    r"fonts\.googleapis|fonts\.gstatic|googletagmanager|google-analytics|cdn\.|cdnjs|jsdelivr|unpkg|"
    r"fontawesome|typekit|bootstrapcdn|polyfill\.io|\.(?:css|js|mjs|woff2?|ttf|otf)(?:[?#]|$)", re.IGNORECASE)


def test_mkdocs_yml_names_no_font_script_or_css_host():
    config = MKDOCS_YML.read_text()
    urls = re.findall(r"""https?://[^\s'"<>)]+""", config)
    assert not [u for u in urls if FONT_SCRIPT_CSS_HOST.search(u)], urls
    assert re.search(r"^\s+font:\s*false\s*(#.*)?$", config, re.MULTILINE), "theme: font: false (no Google Fonts)"
    for key in ("extra_css", "extra_javascript"):  # local files only, if any
        block = re.search(rf"^{key}:\n((?:\s+-.*\n)*)", config, re.MULTILINE)
        assert not block or "//" not in block.group(1), block and block.group(1)


def test_mkdocs_yml_reports_broken_links_and_anchors():
    config = MKDOCS_YML.read_text()
    validation = re.search(r"^validation:\n((?:[ \t]+.*\n|\n)*)", config, re.MULTILINE)
    assert validation, "mkdocs.yml: a validation: section"
    for key in ("omitted_files", "absolute_links", "unrecognized_links", "anchors"):
        assert re.search(rf"^\s+{key}:\s*warn\b", validation.group(1), re.MULTILINE), f"validation: {key}: warn"
