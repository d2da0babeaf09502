"""Uploads as data that lasts, on both backends (SQLite in DATA_DIR; PostgreSQL by DATABASE_URL).

- an upload survives an app restart (a new create_app on the same store)
- 65+ uploads: the first link still answers (nothing is evicted)
- past UPLOAD_QUOTA_MB a new upload is 507 with a clear message; existing ones are still served,
  and the same bytes again are 200, never refused; concurrent uploads never pass the quota
- the parsed cache is bounded by bytes (raw upload size as weight), least recently used out
- an operator lists, measures and deletes uploads with `python -m app.uploads`
"""
from __future__ import annotations

import hashlib
import json
import threading

import pytest
from snapshots import seed_dict

from app import uploads as uploads_cli
from app.domain.uploads import MB, UploadRejected, UploadStore
from app.stores.uploads import HashCollision, open_backend
from app.web.settings import Settings


def variant(i: int, pad: int = 0) -> bytes:
    doc = seed_dict()
    doc["snapshotId"] = f"store-variant-{i}"
    if pad:
        doc["padding"] = "x" * pad
    return json.dumps(doc).encode()


def ident(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


def post(client, raw: bytes, filename: str = "mine.json"):
    return client.post("/api/walkthroughs", files={"file": (filename, raw, "application/json")})


@pytest.fixture
def store(upload_settings):
    s = upload_settings
    store = UploadStore(open_backend(s["data_dir"], s.get("database_url")), quota_bytes=None, cache_bytes=64 * MB)
    yield store
    store.close()


def test_an_upload_survives_an_app_restart(make_client, upload_settings):
    first = make_client(**upload_settings)
    body = post(first, variant(1)).json()
    first.app.state.catalog.uploads.close()
    del first
    restarted = make_client(**upload_settings)
    assert restarted.get(f"/api/walkthroughs/{body['id']}").status_code == 200
    assert restarted.get(body["url"]).status_code == 200
    assert post(restarted, variant(1)).status_code == 200, "already stored: not new"


def test_65_uploads_and_the_first_link_still_answers(make_client, upload_settings):
    client = make_client(**upload_settings)
    ids = []
    for i in range(66):
        response = post(client, variant(100 + i))
        assert response.status_code == 201, (i, response.text)
        ids.append(response.json()["id"])
    for kept in (ids[0], ids[1], ids[65]):
        assert client.get(f"/api/walkthroughs/{kept}").status_code == 200
    assert client.get(f"/walkthroughs/{ids[0]}/steps/advantages").status_code == 200
    assert len(client.app.state.catalog.uploads.listing()) == 66


def test_a_full_store_refuses_with_507_and_keeps_serving(make_client, upload_settings):
    client = make_client(**upload_settings, upload_quota_mb=1, raise_server_exceptions=False)
    stored, pad = [], 300_000
    while True:
        raw = variant(200 + len(stored), pad)
        response = post(client, raw)
        if response.status_code != 201:
            break
        stored.append((raw, response.json()))
        assert len(stored) < 5, "a 1 MB quota holds three uploads of ~350 kB"
    assert len(stored) == 3 and response.status_code == 507, response.text
    error = response.json()["error"]
    assert "storage is full" in error and "of 1.0 MB" in error and "already made still open" in error, error
    used = client.app.state.catalog.uploads.total_bytes()
    assert used == sum(len(raw) for raw, _ in stored) <= 1 * MB
    # the HTML form says so too, next to the field
    page = client.post("/walkthroughs/new", files={"file": ("big.json", variant(999, pad), "application/json")})
    assert page.status_code == 507 and "storage is full" in page.text
    for raw, body in stored:
        assert client.get(body["url"]).status_code == 200
        assert client.get(f"/api/walkthroughs/{body['id']}").status_code == 200
        again = post(client, raw, filename="again.json")  # the same bytes are not a new upload
        assert again.status_code == 200 and again.json()["id"] == body["id"]
    # a small upload that still fits is taken
    assert post(client, variant(300)).status_code == 201


def test_concurrent_uploads_never_pass_the_quota(upload_settings):
    s = upload_settings
    store = UploadStore(open_backend(s["data_dir"], s.get("database_url")), quota_bytes=1 * MB)
    raws = [variant(400 + i, 300_000) for i in range(8)]
    results: list[int] = []

    def upload(raw):
        try:
            store.add(raw)
            results.append(201)
        except UploadRejected as exc:
            results.append(exc.status)

    threads = [threading.Thread(target=upload, args=(raw,)) for raw in raws]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [201] * 3 + [507] * 5, results
    assert store.total_bytes() <= 1 * MB
    store.close()


def test_parsed_cache_is_bounded_by_bytes(store):
    raws = [variant(500 + i) for i in range(5)]
    size = len(raws[0])
    assert all(abs(len(r) - size) < 8 for r in raws)
    store.cache_limit = int(size * 2.5)  # room for two
    for raw in raws:
        store.add(raw)
    assert store.cached_ids() == [ident(raws[3]), ident(raws[4])]
    assert store.cached_bytes == len(raws[3]) + len(raws[4]) <= store.cache_limit
    # an upload out of the cache is read back from the backend, and becomes the most recent
    assert store.get(ident(raws[0])) is not None
    assert store.cached_ids() == [ident(raws[4]), ident(raws[0])]
    # least recently used goes first: reading raws[4] keeps it over raws[0]
    store.get(ident(raws[4]))
    store.get(ident(raws[1]))
    assert store.cached_ids() == [ident(raws[4]), ident(raws[1])]
    # an upload heavier than the whole cache is served, never cached
    big = variant(600, size * 3)
    entry, created = store.add(big)
    assert created and store.get(ident(big)) is not None and ident(big) not in store.cached_ids()
    assert store.cached_bytes <= store.cache_limit


def test_a_hash_prefix_collision_is_refused_not_served(store):
    raw = variant(700)
    store.add(raw)
    with pytest.raises(HashCollision):
        store.backend.put(ident(raw), "0" * 64, b"other bytes", "x.json", None)
    assert store.backend.get(ident(raw)) == raw


def test_the_operator_cli_lists_measures_and_deletes(upload_settings, monkeypatch, capsys, make_client):
    monkeypatch.delenv("UPLOADS_DIR", raising=False)
    monkeypatch.setenv("DATA_DIR", str(upload_settings["data_dir"]))
    if "database_url" in upload_settings:
        # trust auth ignores the password; the CLI must never print it
        upload_settings["database_url"] = upload_settings["database_url"].replace("postgres@", "postgres:s3cret@")
        monkeypatch.setenv("DATABASE_URL", upload_settings["database_url"])
    else:
        monkeypatch.delenv("DATABASE_URL", raising=False)
    client = make_client(**upload_settings)
    a = post(client, variant(800), filename="class\x1b[31m-notes.json").json()
    b = post(client, variant(801)).json()
    assert uploads_cli.main(["list"]) == 0
    listing = capsys.readouterr().out
    assert a["id"] in listing and b["id"] in listing and "\x1b" not in listing and "class?[31m-notes.json" in listing
    assert uploads_cli.main(["usage"]) == 0
    usage = capsys.readouterr().out
    assert "uploads: 2" in usage and f"used: {len(variant(800)) + len(variant(801))} bytes" in usage
    assert ("postgresql" if "database_url" in upload_settings else "sqlite") in usage
    assert "s3cret" not in usage
    assert uploads_cli.main(["delete", a["id"], "ffffffffffffffff"]) == 1
    out = capsys.readouterr()
    assert f"deleted {a['id']}" in out.out and "no upload 'ffffffffffffffff'" in out.err
    # the running app answers 404 at once, though it had the upload in its cache
    assert client.get(f"/api/walkthroughs/{a['id']}").status_code == 404
    assert client.get(f"/api/walkthroughs/{b['id']}").status_code == 200


def test_postgres_reconnects_after_its_connections_are_dropped(postgres_server, tmp_path):
    import psycopg

    url = postgres_server.create_database()
    store = UploadStore.open(tmp_path, url)
    raw = variant(900)
    store.add(raw)
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE datname = current_database() AND pid <> pg_backend_pid()")
    store._forget(ident(raw))
    assert store.get(ident(raw)) is not None, "a dropped connection is replaced, once, transparently"
    store.close()


def test_data_dir_settings_and_the_old_name(monkeypatch):
    for name in ("DATA_DIR", "UPLOADS_DIR", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    assert Settings(data_dir="/a", uploads_dir="/b").resolved_data_dir.as_posix() == "/a"
    assert Settings(uploads_dir="/b").resolved_data_dir.as_posix() == "/b"
    assert Settings(xdg_data_home="/x").resolved_data_dir.as_posix() == "/x/grpo-walkthrough"
    monkeypatch.setenv("UPLOADS_DIR", "/old")
    assert Settings().resolved_data_dir.as_posix() == "/old", "the old variable still works"
    monkeypatch.setenv("DATA_DIR", "/new")
    assert Settings().resolved_data_dir.as_posix() == "/new", "the new one wins"


def test_a_bad_database_url_stops_start_up(tmp_path):
    with pytest.raises(ValueError, match="postgresql://"):
        UploadStore.open(tmp_path, "mysql://somewhere/db")
