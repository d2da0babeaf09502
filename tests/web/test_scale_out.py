"""Two app processes (replicas, as behind a load balancer) on one PostgreSQL (DATABASE_URL):
an upload made through one is served by the other, the quota is shared, and the operator's
`python -m app.uploads delete` reaches both at once."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
from live_server import running_server
from paths import ROOT
from snapshots import seed_dict

pytestmark = [pytest.mark.slow, pytest.mark.slower_tier, pytest.mark.serial]
# real server processes under load: `make test-slower`, alone (serial), after its parallel phase


def variant(i: int, pad: int = 0) -> bytes:
    doc = seed_dict()
    doc["snapshotId"] = f"scale-out-{i}"
    if pad:
        doc["padding"] = "x" * pad
    return json.dumps(doc).encode()


def upload(url: str, raw: bytes) -> httpx.Response:
    return httpx.post(url + "/api/walkthroughs", files={"file": ("mine.json", raw, "application/json")}, timeout=30)


def test_an_upload_on_one_replica_is_served_by_the_other(postgres_server, tmp_path):
    db = postgres_server.create_database()
    common = {"DATABASE_URL": db, "UPLOAD_QUOTA_MB": "1"}
    args = ("--device", "cpu", "--log-level", "warning")
    with running_server(tmp_path, *args, env={**common, "DATA_DIR": str(tmp_path / "a-data")}) as a, \
         running_server(tmp_path, *args, env={**common, "DATA_DIR": str(tmp_path / "b-data")}) as b:
        made = upload(a.url, variant(1))
        assert made.status_code == 201, made.text
        body = made.json()
        # never seen by b before: read from the shared database
        assert httpx.get(f"{b.url}/api/walkthroughs/{body['id']}", timeout=30).status_code == 200
        page = httpx.get(b.url + body["url"], timeout=30)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        # the replicas share nothing but the store, yet give the same ETag: a tag from either
        # gets a 304 from either (pages, the upload's JSON, and the seed's tensors)
        for path in (body["url"], f"/api/walkthroughs/{body['id']}",
                     "/api/walkthroughs/toy_grpo/step?step=clip", "/walkthroughs/toy_grpo/steps/clip"):
            tags = {httpx.get(s.url + path, timeout=30).headers["etag"] for s in (a, b)}
            assert len(tags) == 1, (path, tags)
            for server in (a, b):
                again = httpx.get(server.url + path, headers={"If-None-Match": tags.pop() if tags else ""}, timeout=30)
                tags = {again.headers["etag"]}
                assert again.status_code == 304 and again.content == b"", (path, again.status_code)
        assert upload(b.url, variant(1)).status_code == 200, "the same bytes on the other replica: not new"
        # one quota for both: two ~350 kB uploads on a, then b refuses the third (1 MB in all)
        assert upload(a.url, variant(2, 300_000)).status_code == 201
        assert upload(a.url, variant(3, 300_000)).status_code == 201
        assert upload(a.url, variant(4, 300_000)).status_code == 201
        full = upload(b.url, variant(5, 300_000))
        assert full.status_code == 507 and "storage is full" in full.json()["error"]
        # nothing was written to either replica's own data folder
        assert not (tmp_path / "a-data").exists() and not (tmp_path / "b-data").exists()
        # the operator deletes through the CLI: both replicas answer 404 at once
        env = {**os.environ, "DATABASE_URL": db}
        env.pop("UPLOADS_DIR", None)
        cli = subprocess.run([sys.executable, "-m", "app.uploads", "delete", body["id"]], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0 and f"deleted {body['id']}" in cli.stdout, cli.stderr
        for server in (a, b):
            assert httpx.get(f"{server.url}/api/walkthroughs/{body['id']}", timeout=30).status_code == 404
