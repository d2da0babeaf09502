"""A kind's stylesheet styles only its own elements. Every kind's stylesheets load on every page (web/kind.py),
so a rule whose leftmost part matches elements of the shared templates or of another kind restyles them:
the real model's `.attention-map { width: 100%; height: 18rem }` shrank the tiny LM's 1:1 attention map
(its 11 px labels drawn at 10.28 px) and its `.adv-bar` reached the toy's advantage bars.

For each rule of app/kinds/<kind>/static/*.css, the classes of its leftmost compound selector (what the
rule is anchored on) must not all appear on elements of the shared templates or another kind's."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from paths import ROOT

KINDS = ROOT / "app" / "kinds"
SHARED_TEMPLATES = ROOT / "templates"
CLASS_ATTR = re.compile(r'class="([^"]*)"')
JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)
COMMENT = re.compile(r"/\*.*?\*/", re.S)
RULE = re.compile(r"([^{}@]+)\{[^{}]*\}")


def template_classes(folder: Path) -> set[str]:
    found: set[str] = set()
    for path in folder.rglob("*.html"):
        for value in CLASS_ATTR.findall(path.read_text(encoding="utf-8")):
            found.update(JINJA.sub(" ", value).split())
    return found


def anchors(css: str) -> list[tuple[str, set[str]]]:
    """(selector, the classes of its leftmost compound) for every selector of every rule (inside @media too)."""
    out = []
    for selectors in RULE.findall(COMMENT.sub("", css)):
        for selector in selectors.split(","):
            selector = selector.strip()
            if not selector:
                continue
            first = re.split(r"\s*[\s>+~]\s*", selector, maxsplit=1)[0]
            out.append((selector, set(re.findall(r"\.([A-Za-z][\w-]*)", first))))
    return out


STYLED = sorted((kind.name, css) for kind in KINDS.iterdir() if (kind / "static").is_dir()
                for css in (kind / "static").glob("*.css"))


@pytest.mark.parametrize(("kind", "css"), STYLED, ids=[f"{k}/{c.name}" for k, c in STYLED])
def test_a_kinds_rules_are_anchored_on_its_own_elements(kind, css):
    elsewhere = template_classes(SHARED_TEMPLATES)
    for other in KINDS.iterdir():
        if other.name != kind and (other / "templates").is_dir():
            elsewhere |= template_classes(other / "templates")
    leaks = [selector for selector, classes in anchors(css.read_text(encoding="utf-8"))
             if classes and classes <= elsewhere]
    assert not leaks, f"{css.relative_to(ROOT)}: rules anchored on classes other templates use: {leaks}"


def test_the_check_sees_a_leak():
    """The rule above on a stylesheet that does leak (the real model's, before the fix)."""
    elsewhere = template_classes(KINDS / "tiny_lm" / "templates") | template_classes(SHARED_TEMPLATES)
    leaks = [s for s, c in anchors(".attention-map { width: 100% }\n.smol-x .attention-map { fill: red }")
             if c and c <= elsewhere]
    assert leaks == [".attention-map"]
