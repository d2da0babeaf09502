"""The real-model kind's page and API tests share one way to get an app: the repository's walkthroughs,
a data directory (job store, converted weights) of the module's own, redirects answered, not followed."""
from __future__ import annotations

import pytest
from paths import ROOT


@pytest.fixture(scope="module")
def client(make_client, tmp_path_factory, request):
    return make_client(walkthroughs_dir=ROOT / "walkthroughs", follow_redirects=False,
                       data_dir=tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2]))
