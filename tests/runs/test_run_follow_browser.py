"""A followed run's explorer in Chromium (issue 50), at 1280×720 and 390×844: the page says "Following", a writer
adds a step to the folder, and within 5 s the new step is on the page (title, status line, every chart's points)
without a reload (a marker set on the window survives), with no console error, CSP violation or failed request and
nothing scrolling sideways. Once the follower stops, the line says following ended and the page polls no more.
Without script, the line carries a `<noscript>` refresh. A run opened from a folder is followed from its own explorer
by its "Follow this folder as it grows" button, and stopped by "Stop following". Screenshots:
test-output/screenshots/run-follow/."""
from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import uvicorn
from paths import ROOT
from playwright.sync_api import Page, expect
from run_browser import NO_SIDEWAYS_SCROLL, SIZES, bad_requests, shoot
from run_fixtures import entry, state

from app.domain.uploads import UploadStore
from app.house import create_app
from app.runs.domain.run_follow import follow_id
from app.runs.engine.run_follower import Follower
from app.runs.engine.run_opening import open_run_dir
from app.runs.web.run_pages import store_for
from app.web.settings import Settings

pytestmark = pytest.mark.browser

SHOTS = ROOT / "test-output" / "screenshots" / "run-follow"


def document(n: int) -> str:
    return json.dumps(state([entry(s, kl=0.01 * s) for s in range(1, n + 1)], close=False))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("follow-data")


@pytest.fixture(scope="module")
def base_url(walkthroughs_dir, data_dir) -> Iterator[str]:
    """The app over its own data directory, the one the follower below writes."""
    app = create_app(Settings(walkthroughs_dir=walkthroughs_dir, data_dir=data_dir, device="cpu"))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                           lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, name="uvicorn-follow", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not (server.started and server.servers):
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=10)
    app.state.run_follows.stop_all()  # the lifespan is off here: the followers its button started


@pytest.fixture
def followed(tmp_path, data_dir):
    """A TRL folder of 3 steps, followed (every 0.2 s) in a thread; stopped at the end."""
    out = tmp_path / f"run-{uuid.uuid4().hex[:6]}"
    out.mkdir()
    (out / "trainer_state.json").write_text(document(3))
    uploads = UploadStore.open(data_dir, None, quota_mb=100, cache_mb=0)
    follower = Follower(out, store_for(Settings(data_dir=data_dir), uploads.backend), uploads, say=lambda _: None)
    stop = threading.Event()
    thread = threading.Thread(target=follower.run, args=(0.2, stop.is_set), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while follower.state.version < 1:
        assert time.monotonic() < deadline, "the follower stored nothing"
        time.sleep(0.05)
    yield out, follower, stop
    stop.set()
    thread.join(10)
    uploads.close()


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_a_new_step_appears_in_place_without_a_reload(make_context, base_url, followed, size):
    out, follower, stop = followed
    width, height = SIZES[size]
    page: Page = make_context(viewport={"width": width, "height": height}).new_page()
    bad = bad_requests(page, base_url)
    page.goto(f"/runs/{follower.id}")
    status = page.locator("#run-follow")
    expect(status).to_contain_text("Following")
    expect(status).to_contain_text("3 steps (to step 3)")
    expect(page.locator(".run-title")).to_contain_text("3 logged steps")
    page.evaluate("window.__notReloaded = true")
    (out / "trainer_state.json").write_text(document(4))
    started = time.monotonic()
    expect(page.locator(".run-title")).to_contain_text("4 logged steps", timeout=5_000)
    took = time.monotonic() - started
    expect(status).to_contain_text("4 steps (to step 4)")
    kl = page.locator('figure.run-chart[data-metric="kl"] svg')
    assert (kl.get_attribute("data-steps") or "").replace(",", " ").split()[-1] == "4"  # the chart has step 4
    assert page.evaluate("window.__notReloaded === true"), "the page was reloaded"
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    assert took < 5
    shoot(page, SHOTS, "following", size)
    stop.set()
    expect(status).to_contain_text("ended", timeout=5_000)
    expect(page.locator("#run-follow")).not_to_have_attribute("hx-trigger", "every 2s")
    assert bad == []


def test_without_script_the_status_refreshes_the_page(make_context, followed):
    _, follower, _ = followed
    page = make_context(java_script_enabled=False).new_page()
    page.goto(f"/runs/{follower.id}")
    expect(page.locator("#run-follow")).to_contain_text("Following")
    assert page.locator('#run-follow noscript').count() == 1


def test_the_explorer_follows_its_own_folder_from_its_button(make_context, base_url, data_dir, tmp_path):
    out = tmp_path / f"mine-{uuid.uuid4().hex[:6]}"
    out.mkdir()
    (out / "trainer_state.json").write_text(document(2))
    uploads = UploadStore.open(data_dir, None, quota_mb=100, cache_mb=0)
    try:
        run = open_run_dir(out, store_for(Settings(data_dir=data_dir), uploads.backend), uploads).id
    finally:
        uploads.close()
    page: Page = make_context().new_page()
    bad = bad_requests(page, base_url)
    page.goto(f"/runs/{run}")
    page.locator("#run-follow-start").click()  # a plain form: POST, then 303 to the followed id
    page.wait_for_url(f"**/runs/{follow_id(out)}")
    status = page.locator("#run-follow")
    expect(status).to_contain_text("Following")
    page.evaluate("window.__notReloaded = true")
    (out / "trainer_state.json").write_text(document(3))
    expect(page.locator(".run-title")).to_contain_text("3 logged steps", timeout=5_000)
    assert page.evaluate("window.__notReloaded === true"), "the page was reloaded"
    shoot(page, SHOTS, "followed-from-the-explorer", "laptop")
    page.locator("#run-follow-stop").click()
    expect(status).to_contain_text("ended")
    expect(page.locator("#run-follow-start")).to_be_visible()  # and may be followed again
    assert bad == []
