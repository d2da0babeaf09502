"""A toy page that needs a training path's runs waits for those jobs on the event loop, not in a
compute worker (web/jobs/wait.py). On a real server with one compute worker and no runner (so its
runs wait as long as we like), an unrelated computation still gets the worker at once; the page
comes as soon as a runner (`python -m app.worker`) has done its runs."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import httpx
import pytest
from live_server import running_server
from paths import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.slower_tier, pytest.mark.serial]
# real server processes under load: `make test-slower`, alone (serial), after its parallel phase
TENSORS = "/api/walkthroughs/toy_grpo/step?step=clip&seed={}"


def test_a_page_waiting_for_its_runs_leaves_the_compute_worker_free(tmp_path):
    env = {"DATA_DIR": str(tmp_path / "data"), "COMPUTE_SLOTS": "1", "JOB_RUNNER": "off", "DEVICE": "cpu"}
    (tmp_path / "web").mkdir()
    with running_server(tmp_path / "web", env=env) as server:
        assert httpx.get(server.url + TENSORS.format(1), timeout=120).status_code == 200  # the worker is up
        answers: dict[str, httpx.Response] = {}
        # its Run button (a POST: the runs queued), then the page itself (the 303), which waits for them
        page = threading.Thread(target=lambda: answers.update(page=httpx.post(
            server.url + "/walkthroughs/toy_grpo/steps/clip?process=r1&seed=91", timeout=120, follow_redirects=True)))
        page.start()
        time.sleep(1.0)  # the page now waits for its three runs, which no runner takes yet
        t0 = time.monotonic()
        other = httpx.get(server.url + TENSORS.format(2), timeout=60)
        took = time.monotonic() - t0
        assert other.status_code == 200 and took < 2.0, (other.status_code, took)  # not behind the page
        assert page.is_alive()
        worker = subprocess.Popen([sys.executable, "-m", "app.worker"], cwd=ROOT, env={**os.environ, **env},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            page.join(90)
        finally:
            worker.terminate()
            worker.wait(30)
        assert answers["page"].status_code == 200 and "R1" in answers["page"].text
