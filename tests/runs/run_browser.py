"""What the run pages' browser tests share (the explorer, the diff of two recorded steps, the upload with its
progress bar): the three sizes, the checks every page gets (nothing scrolls sideways, no failed or off-site
request), a heading in the first view, and screenshots of the first view and the whole page."""
from __future__ import annotations

from pathlib import Path

import httpx
from playwright.sync_api import Page

SIZES = {"phone": (390, 844), "laptop": (1280, 720), "desktop": (1920, 1080)}
NO_SIDEWAYS_SCROLL = "() => document.scrollingElement.scrollWidth <= window.innerWidth"


def example_run_url(base_url: str) -> str:
    """The shipped TRL run stored (or found stored) by its API twin: its explorer's URL."""
    r = httpx.post(base_url + "/api/runs/examples/trl", timeout=120)
    assert r.status_code in (200, 201), r.text
    return r.json()["url"]


def bad_requests(page: Page, base_url: str) -> list[str]:
    """Filled as the page runs: every failed request, every answer >= 400, every request to another host."""
    bad: list[str] = []
    page.on("requestfailed", lambda req: ("/static/favicon" in req.url and "ERR_ABORTED" in str(req.failure))
            or bad.append(f"failed: {req.url} ({req.failure})"))  # the favicon fetch cut by a navigation: no failure
    page.on("response", lambda res: res.status >= 400 and bad.append(f"{res.status}: {res.url}"))
    page.on("request", lambda req: req.url.startswith((base_url + "/", "data:", "about:"))
            or bad.append(f"another host: {req.url}"))
    return bad


def top_in_view(page: Page, selector: str, room: int = 40) -> bool:
    """The element's top is on screen with at least `room` px of it showing."""
    return page.evaluate("""([sel, room]) => { const r = document.querySelector(sel).getBoundingClientRect();
        return r.top >= -1 && r.top < window.innerHeight - room; }""", [selector, room])


def shoot(page: Page, shots: Path, name: str, size: str) -> None:
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"{name}-{size}.png"), caret="initial")
    page.screenshot(path=str(shots / f"{name}-{size}-full.png"), full_page=True, caret="initial")
