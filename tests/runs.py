"""Training runs a test needs, started as the server starts them: a GET never does (web/jobs/start.py).

`start_default_runs(app)` queues a kind's default runs as `python -m app` does at start-up (the
suite's apps have DEFAULT_RUNS off, tests/conftest.py), for tests that read the default paths;
`start(client, url)` is a page's or an API's Run button: a POST to the address that reads them."""
from __future__ import annotations

from app.web.jobs.start import queue_default_runs

TOY = "toy"


def start_default_runs(app, kinds: tuple[str, ...] = (TOY,)) -> None:
    for kind in app.state.kinds.kinds:
        if kind.id in kinds and kind.default_runs is not None:
            queue_default_runs(app.state.context.jobs, kind.default_runs(app))


def start(client, url: str):
    """POST `url` (a page's Run button, or the API's POST of a path); the answer must not be a refusal."""
    r = client.post(url, follow_redirects=False)
    assert r.status_code in (200, 202, 303), f"POST {url}: {r.status_code} {r.text[:300]}"
    return r


def start_toy_paths(jobs, catalog, seed: int, iterations_scale: int = 1) -> None:
    """Every toy path's run queued with `jobs` (for view tests on a job client alone, tests/conftest.py's
    `job_client`)."""
    from app.kinds.toy.engine.process_jobs import process_job

    for pid in catalog.ids:
        jobs.submit(process_job(catalog, pid, seed, iterations_scale))


def jobs_of(client):
    """The job client of a TestClient's app (its AppContext's: no other app shares it)."""
    return client.app.state.context.jobs
