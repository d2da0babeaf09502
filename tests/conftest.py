import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

# tests import their own helpers (grpo_reference, paths, snapshots) by module name
sys.path.insert(0, str(Path(__file__).parent))

from app.web.factory import create_app  # noqa: E402  (after the path set-up above)
from app.web.settings import Settings  # noqa: E402


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
