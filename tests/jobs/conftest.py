"""What the job tests share: the job store on both backends (SQLite in DATA_DIR; PostgreSQL by DATABASE_URL,
a throwaway server of this run's)."""
from __future__ import annotations

import pytest

from app.stores.jobs import open_job_backend


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    url = request.getfixturevalue("postgres_server").create_database() if request.param == "postgres" else None
    backend = open_job_backend(tmp_path / "data", url)
    yield backend
    backend.close()
