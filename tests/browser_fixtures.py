"""Browser fixtures (a plugin of tests/conftest.py, so a kind's page tests can live in its own folder):
one uvicorn server and one Chromium per session (per xdist worker), a fresh context per test.

Debian's Chromium drives the pages (Playwright's own download does not work here). A
missing browser is a loud failure, never a skip: these tests run in `make test` and CI.
Every page records console errors, uncaught exceptions and CSP violations; a test that
leaves any fails in teardown.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, expect, sync_playwright
from runs import start_default_runs
from snapshots import SEED_PATH, framing_snapshot, other_snapshot

from app.house import create_app
from app.web.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "test-output" / "screenshots"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
VIEWPORT = {"width": 1400, "height": 1000}

expect.set_options(timeout=5_000)

# The page's own listener, installed before any script of the page runs: CSP violations
# (inline style or script the policy refused) become console errors the fixture sees.
CSP_LISTENER = """
document.addEventListener("securitypolicyviolation", function (e) {
  console.error("CSP violation: " + e.violatedDirective + " blocked " + (e.blockedURI || "inline")
                + " at " + e.sourceFile + ":" + e.lineNumber
                + " on " + (e.target && e.target.outerHTML ? e.target.outerHTML.slice(0, 160) : e.target));
});
"""


BROWSER_FIXTURES = {"browser", "page", "context", "make_context"}


def pytest_collection_modifyitems(items):
    """A test that opens a page must say so (`-m "not browser"` is the loop without Chromium)."""
    for item in items:
        if BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("browser") is None:
            raise pytest.UsageError(f"{item.nodeid} uses a browser fixture but lacks @pytest.mark.browser")


@pytest.fixture(scope="session")
def walkthroughs_dir(tmp_path_factory) -> Path:
    """The embedded toy_grpo export, a view-only snapshot with hostile text, and one whose
    saved cameras and viewports are far from what any frame here has (camera fitting)."""
    folder = tmp_path_factory.mktemp("walkthroughs")
    shutil.copy(SEED_PATH, folder / SEED_PATH.name)
    (folder / "other.json").write_text(json.dumps(other_snapshot()))
    (folder / "framing.json").write_text(json.dumps(framing_snapshot()))
    return folder


@contextlib.contextmanager
def serving(folder: Path, name: str = "uvicorn") -> Iterator[str]:
    """The app over `folder`, in a thread on a free loopback port, healthy before use."""
    app = create_app(Settings(walkthroughs_dir=folder, device="cpu"))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                           lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not (server.started and server.servers):
        assert thread.is_alive(), "uvicorn stopped during start-up"
        assert time.monotonic() < deadline, "uvicorn did not start within 30 s"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with urllib.request.urlopen(url + "/healthz", timeout=10) as r:
        assert json.load(r) == {"status": "ok"}
    start_default_runs(app)  # the toy's default paths, as `python -m app` queues them at start-up (lifespan off here)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def base_url(walkthroughs_dir) -> Iterator[str]:
    with serving(walkthroughs_dir) as url:
        yield url


@pytest.fixture(scope="session")
def repo_base_url() -> Iterator[str]:
    """A server of the repository's own walkthroughs folder (toy_grpo and tiny_lm_grpo); a module
    that needs the tiny LM overrides `base_url` with it (the session's folder has none)."""
    with serving(ROOT / "walkthroughs", "uvicorn-repo") as url:
        yield url


@pytest.fixture(scope="session")
def browser() -> Browser:
    path = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
    assert Path(path).exists(), f"Chromium not found at {path} (set CHROMIUM_PATH or run `make chromium`)"
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


class Problems:
    """Console errors, uncaught page errors and CSP violations of one context's pages."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.allowed: list[str] = []   # substrings of expected messages (e.g. a deliberate 422)

    def console(self, msg: ConsoleMessage) -> None:
        if msg.type == "error":
            self.add(f"console error: {msg.text} ({msg.location.get('url')})")

    def add(self, text: str) -> None:
        if not any(a in text for a in self.allowed):
            self.items.append(text)

    def watch(self, page: Page) -> None:
        page.on("console", self.console)
        page.on("pageerror", lambda err: self.add(f"page error: {err}"))


@pytest.fixture
def problems() -> Problems:
    return Problems()


@pytest.fixture
def make_context(browser, base_url, problems):
    """Factory for contexts (kwargs go to new_context); all pages are watched for problems."""
    contexts: list[BrowserContext] = []

    def make(**kwargs) -> BrowserContext:
        kwargs.setdefault("viewport", VIEWPORT)
        ctx = browser.new_context(base_url=base_url, **kwargs)
        ctx.set_default_timeout(10_000)
        ctx.add_init_script(CSP_LISTENER)
        ctx.on("page", problems.watch)
        contexts.append(ctx)
        return ctx

    yield make
    for ctx in contexts:
        ctx.close()
    assert not problems.items, "problems on the pages:\n" + "\n".join(problems.items)


@pytest.fixture
def context(make_context) -> BrowserContext:
    return make_context()


@pytest.fixture
def page(context) -> Page:
    return context.new_page()


@pytest.fixture
def shot(request):
    """shot(page, name): a full-page screenshot under test-output/screenshots/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    prefix = request.node.name.replace("[", "-").replace("]", "").replace("/", "_")

    def take(page: Page, name: str) -> Path:
        path = SCREENSHOTS / f"{prefix}-{name}.png"
        # caret="hide" would leave style="" on inputs, which htmx then settles under the CSP
        page.screenshot(path=str(path), full_page=True, caret="initial")
        return path

    return take
