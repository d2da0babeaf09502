"""Opening a whole run from the upload page (issue 34) in Chromium at 390×844, 1280×720 and 1920×1080: the archive
picked with the file input, the progress bar moving to 100 % with the MB sent, "Reading the run…", then the run
explorer; no request to another host, nothing scrolls sideways. Without script the same form posts multipart and
lands on the explorer too. Screenshots: test-output/screenshots/run-upload/."""
from __future__ import annotations

import os

import pytest
from archive_fixtures import example_archive
from axe_playwright_python.sync_playwright import Axe
from browser_helpers import axe_blocking, describe
from paths import ROOT
from playwright.sync_api import Page, expect
from run_browser import NO_SIDEWAYS_SCROLL, SIZES, bad_requests

pytestmark = pytest.mark.browser

SHOTS = ROOT / "test-output" / "screenshots" / "run-upload"
# Every change of the bar and its words, kept by the test (a page binding outlives the navigation that follows).
WATCH = """() => {
  const bar = document.getElementById('run-upload-bar'), words = document.getElementById('run-upload-words');
  new MutationObserver(() => window.seen(bar.value, words.textContent))
    .observe(bar, {attributes: true, attributeFilter: ['value']});
  new MutationObserver(() => window.seen(bar.value, words.textContent))
    .observe(words, {childList: true, characterData: true, subtree: true});
}"""


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    # 6 MB of incompressible bytes beside the run, so the upload lasts long enough to report progress
    path = tmp_path_factory.mktemp("archives") / "trl-run.tar.gz"
    path.write_bytes(example_archive("tar.gz", extra=[("trl-run/notes.bin", os.urandom(6 * 1024 * 1024))]))
    return path


@pytest.mark.parametrize("size", SIZES)
def test_the_progress_bar_reaches_100_and_the_explorer_opens(make_context, base_url, archive, size):
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    bad = bad_requests(page, base_url)
    seen: list[tuple[float, str]] = []
    page.expose_function("seen", lambda value, words: seen.append((value, words)))
    page.goto("/walkthroughs/new")
    form = page.locator("#run-upload-form")
    form.scroll_into_view_if_needed()
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"form-{size}.png"))
    page.evaluate(WATCH)
    page.locator("#run-upload-file").set_input_files(str(archive))
    form.locator("button[type=submit]").click()
    page.wait_for_url("**/runs/*", timeout=60_000)
    expect(page.locator("h1")).to_have_text("A GRPO run: 120 logged steps")
    values = [v for v, _ in seen]
    assert values and values[-1] == 100 and values == sorted(values), values  # it only moves forward, to 100 %
    words = [t for _, t in seen]
    assert any("MB sent" in t for t in words) and any("Reading the run…" in t for t in words), words
    assert bad == []
    page.screenshot(path=str(SHOTS / f"explorer-{size}.png"))


def test_the_form_without_script_lands_on_the_explorer(make_context, base_url, archive):
    page = make_context(viewport={"width": 390, "height": 844}, java_script_enabled=False).new_page()
    bad = bad_requests(page, base_url)
    page.goto("/walkthroughs/new")
    expect(page.locator("#run-upload-status")).to_be_hidden()
    page.locator("#run-upload-file").set_input_files(str(archive))
    page.locator("#run-upload-form button[type=submit]").click()
    page.wait_for_url("**/runs/*", timeout=60_000)
    expect(page.locator("h1")).to_have_text("A GRPO run: 120 logged steps")
    assert bad == []


def test_a_refused_archive_is_said_beside_the_form(make_context, base_url, problems, tmp_path):
    problems.allowed.append("status of 400 (Bad Request) (" + base_url + "/api/runs)")  # the refusal, deliberate
    bad_archive = tmp_path / "notes.zip"
    bad_archive.write_bytes(b"these are notes, not an archive")
    page = make_context(viewport={"width": 390, "height": 844}).new_page()
    page.goto("/walkthroughs/new")
    page.locator("#run-upload-file").set_input_files(str(bad_archive))
    page.locator("#run-upload-form button[type=submit]").click()
    error = page.locator("#run-upload-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("(400): not a .zip, .tar or .tar.gz archive")
    expect(page.locator("#run-upload-status")).to_be_hidden()
    assert page.url.endswith("/walkthroughs/new") and page.evaluate(NO_SIDEWAYS_SCROLL)
    page.screenshot(path=str(SHOTS / "refused-phone.png"))


def test_axe_finds_no_serious_violations_with_the_bar_showing(make_context):
    page = make_context(viewport={"width": 390, "height": 844}).new_page()

    def settle(p: Page) -> None:  # the bar and its words as they are mid-upload
        p.evaluate("""() => { document.getElementById('run-upload-status').hidden = false;
            document.getElementById('run-upload-bar').value = 42;
            document.getElementById('run-upload-words').textContent = '42 % · 2.5 of 6.0 MB sent'; }""")

    blocking = axe_blocking(page, Axe(), ["/walkthroughs/new"], settle)
    assert not blocking, "\n\n".join(f"{url}\n{describe(vs)}" for url, vs in blocking.items())
