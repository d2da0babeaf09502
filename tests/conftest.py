import os
import sys
import tempfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

# The apps tests build in this process compute in threads (COMPUTE_PROCESSES=0): dozens of apps,
# each spawning worker processes, would be slow, and many tests hold an app's in-process limiter.
# Real servers (live_server.py, the benchmark) drop it and run `python -m app`'s worker processes.
os.environ.setdefault("COMPUTE_PROCESSES", "0")
# Their training-path jobs run on runner threads in the same process (JOB_RUNNER=thread): a TestClient
# runs no lifespan, so no runner child would start. Real servers drop it too (the default: a child).
os.environ.setdefault("JOB_RUNNER", "thread")
# The server queues its kinds' default runs at start-up (DEFAULT_RUNS); the suite's apps do not, so no
# test finds a run it did not start (the start-up test turns it on for its own server).
os.environ.setdefault("DEFAULT_RUNS", "0")
# Nor do they warm up (WARM_UP: every featured step drawn before /readyz says ready, seconds of CPU): a real
# server a test starts inherits it too, unless the test asks for a warm-up (tests/web/test_first_minute.py).
os.environ.setdefault("WARM_UP", "0")
# Apps built with default settings keep uploads and jobs under XDG_DATA_HOME: a folder of this run's,
# never the home directory (DATA_DIR or UPLOADS_DIR, where a test sets one, still wins).
os.environ.setdefault("XDG_DATA_HOME", tempfile.mkdtemp(prefix="grpo-tests-"))

# tests import their own helpers (grpo_reference, paths, snapshots) by module name
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "kinds" / "smollm"))

# The suite's apps run the real-model kind on a tiny GGUF of SmolLM2's architecture (13 blocks of width
# 64, random weights: a step in seconds, not minutes and 9 GB); the tests of the real checkpoint
# (tests/kinds/smollm/test_real_*.py, the slower tier) drop it and read the installed file.
if "SMOLLM_GGUF" not in os.environ:
    from smollm_tiny_gguf import write_tiny_gguf  # noqa: E402

    _tiny = Path(tempfile.mkdtemp(prefix="smollm-tiny-")) / "tiny-smollm2.gguf"
    write_tiny_gguf(_tiny, n_layer=13)
    os.environ["SMOLLM_GGUF"] = str(_tiny)

from app.house import (
    create_app,  # noqa: E402  (after the path set-up above)
    registry,  # noqa: E402
)
from app.views import meaning  # noqa: E402
from app.web.settings import Settings  # noqa: E402

# The words for nodes, as every app of the house binds them (AppContext.bound): view tests that build a
# screen or call node_meaning without an app read the kinds' words too. An app's requests and compute
# jobs bind their own app's, whatever is bound here.
HOUSE_WORDS = tuple(k.describe for k in registry().kinds if k.describe is not None)

# Chromium, the test server and page fixtures, for any folder's page tests (tests/browser_fixtures.py);
# the same process-wide state before every test, whatever ran before it (tests/isolation.py); the
# quick tier's time guard, --module-budget (tests/tier_budget.py)
pytest_plugins = ["browser_fixtures", "isolation", "tier_budget"]


@pytest.fixture(autouse=True)
def _house_words():
    with meaning.described_by(HOUSE_WORDS):
        yield


@pytest.fixture(scope="session")
def make_client(tmp_path_factory):
    """A TestClient of a fresh app: `make_client(walkthroughs_dir=..., follow_redirects=False)`.

    Settings default to the CPU and a fresh uploads folder per client, so no test sees
    another's uploads; any other keyword is a Settings field.
    """
    def make(*, raise_server_exceptions: bool = True, follow_redirects: bool = True, **settings) -> TestClient:
        settings.setdefault("device", "cpu")
        settings.setdefault("uploads_dir", tmp_path_factory.mktemp("uploads"))
        return TestClient(create_app(Settings(**settings)), raise_server_exceptions=raise_server_exceptions,
                          follow_redirects=follow_redirects)
    return make


@pytest.fixture(scope="session")
def postgres_server():
    """One throwaway PostgreSQL cluster for the session (tests/postgres_server.py); fails, never skips,
    when the binaries are missing."""
    from postgres_server import find_bin_dir, start_postgres

    missing = None
    try:
        find_bin_dir()
    except FileNotFoundError as exc:
        missing = str(exc)
    if missing:
        pytest.fail(missing, pytrace=False)
    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def upload_settings(request, tmp_path):
    """Settings for each upload backend in turn: SQLite in a fresh DATA_DIR, or a fresh PostgreSQL database."""
    settings = {"data_dir": tmp_path / "data"}
    if request.param == "postgres":
        settings["database_url"] = request.getfixturevalue("postgres_server").create_database()
    return settings


@pytest.fixture
def job_client(tmp_path):
    """A job client on a fresh store of the test's own, as an app makes its own (app/web/jobs/setup.py):
    for view tests that wait on a training run without building an app. Its runner threads stop
    after the test (tests/isolation.py)."""
    from app.house import registry
    from app.web.jobs.setup import job_client as make_job_client

    return make_job_client(Settings(data_dir=tmp_path / "data", device="cpu"), registry().tasks)


@pytest.fixture
def unipo() -> dict:
    """UNIPO's canonical fixture, parsed afresh (tests/unipo_fixture.py)."""
    from unipo_fixture import read_fixture

    return read_fixture()
