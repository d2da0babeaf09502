"""Large uploads outside their rows (app/stores/uploads): past INLINE_MAX the bytes are a content-addressed file
DATA_DIR/blobs/<sha256> (SQLite) or a large object (PostgreSQL), the row keeps sha256, size and the reference.

On both backends: a step record of 2 MB goes out of the row and reads back byte-equal (a small upload stays
inline); a blob changed or gone is refused (BlobDamaged, a 404 on the page), never served; a database made
with the schema before blobs still reads its rows and takes blobs; the quota counts the same bytes; deleting
an upload (`python -m app.uploads delete ID`) removes its blob / unlinks its large object."""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading

import pytest
from record_factory import make_record
from snapshots import seed_dict

from app import uploads as uploads_cli
from app.domain.uploads import UploadRejected, UploadStore
from app.stores.uploads import INLINE_MAX, BlobDamaged, open_backend


def snapshot(i: int, pad: int = 0) -> bytes:
    doc = seed_dict()
    doc["snapshotId"] = f"blob-variant-{i}"
    if pad:
        doc["padding"] = "x" * pad
    return json.dumps(doc).encode()


def sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


@pytest.fixture
def backend(upload_settings):
    b = open_backend(upload_settings["data_dir"], upload_settings.get("database_url"))
    yield b
    b.close()


def admin(upload_settings):
    import psycopg

    return psycopg.connect(upload_settings["database_url"], autocommit=True)


def where(upload_settings, ident: str) -> tuple[object, int]:
    """(the row's reference, the length of its `data`), read behind the backend's back."""
    if "database_url" in upload_settings:
        with admin(upload_settings) as conn:
            row = conn.execute("SELECT lo, octet_length(data) FROM grpo_uploads WHERE id = %s", (ident,)).fetchone()
    else:
        with sqlite3.connect(upload_settings["data_dir"] / "uploads.sqlite3") as conn:
            row = conn.execute("SELECT blob, length(data) FROM grpo_uploads WHERE id = ?", (ident,)).fetchone()
    return row[0], int(row[1])


def stored_outside(upload_settings, ident: str) -> bytes:
    ref, _ = where(upload_settings, ident)
    if "database_url" in upload_settings:
        with admin(upload_settings) as conn:
            return bytes(conn.execute("SELECT lo_get(%s)", (ref,)).fetchone()[0])
    return (upload_settings["data_dir"] / ref).read_bytes()


def large_objects(upload_settings) -> int:
    with admin(upload_settings) as conn:
        return conn.execute("SELECT count(*) FROM pg_largeobject_metadata").fetchone()[0]


def test_a_big_record_goes_out_of_its_row_and_reads_back_byte_equal(make_client, upload_settings):
    client = make_client(**upload_settings)
    record = json.dumps(make_record(seed=5, groups=1, size=8, lengths=(4096, 4096), packed=True)).encode()
    small = snapshot(1)
    assert len(record) > INLINE_MAX > len(small)
    big_id = client.post("/api/walkthroughs", files={"file": ("r.grpo-step.json", record)}).json()["id"]
    small_id = client.post("/api/walkthroughs", files={"file": ("s.json", small)}).json()["id"]
    ref, inline = where(upload_settings, big_id)
    assert inline == 0 and ref is not None
    if "database_url" not in upload_settings:
        assert ref == f"blobs/{sha(record)}"  # content-addressed, relative to the data directory
    assert stored_outside(upload_settings, big_id) == record
    assert where(upload_settings, small_id) == (None, len(small))  # a small one stays in its row
    backend = client.app.state.catalog.uploads.backend
    assert backend.get(big_id) == record and backend.get(small_id) == small
    fresh = make_client(**upload_settings)  # another process: nothing cached, parsed from the blob
    assert fresh.get(f"/api/walkthroughs/{big_id}").status_code == 200


def test_a_changed_or_missing_blob_is_refused_never_served(make_client, upload_settings):
    client = make_client(**upload_settings)
    raw = snapshot(2, pad=INLINE_MAX)
    ident = client.post("/api/walkthroughs", files={"file": ("big.json", raw)}).json()["id"]
    backend = client.app.state.catalog.uploads.backend
    ref, _ = where(upload_settings, ident)
    assert raw.endswith(b'xxxxxx"}')
    tampered = raw[:-6] + b"yyyy" + raw[-2:]  # the same length, still valid JSON: only the hash can tell
    if "database_url" in upload_settings:
        with admin(upload_settings) as conn:
            conn.execute("SELECT lo_put(%s, %s, 'yyyy'::bytea)", (ref, len(raw) - 6))
    else:
        (upload_settings["data_dir"] / ref).write_bytes(tampered)
    with pytest.raises(BlobDamaged, match=f"upload {ident}.*no longer match"):
        backend.get(ident)
    restarted = make_client(**upload_settings, raise_server_exceptions=False)
    assert restarted.get(f"/api/walkthroughs/{ident}").status_code == 404  # refused, logged, not served
    if "database_url" in upload_settings:
        with admin(upload_settings) as conn:
            conn.execute("SELECT lo_unlink(%s)", (ref,))
    else:
        (upload_settings["data_dir"] / ref).unlink()
    with pytest.raises(BlobDamaged, match="missing"):
        backend.get(ident)


def test_a_database_made_before_blobs_still_reads_and_takes_blobs(upload_settings):
    old, big = snapshot(3), snapshot(4, pad=INLINE_MAX)
    if "database_url" in upload_settings:  # the schema as it was, verbatim
        with admin(upload_settings) as conn:
            conn.execute("CREATE TABLE grpo_uploads (id text PRIMARY KEY, sha256 text NOT NULL, size integer NOT NULL, "
                         "filename text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), data bytea NOT NULL)")
            conn.execute("INSERT INTO grpo_uploads (id, sha256, size, filename, data) VALUES (%s, %s, %s, 'o.json', %s)",
                         (sha(old)[:16], sha(old), len(old), old))
    else:
        upload_settings["data_dir"].mkdir(parents=True)
        with sqlite3.connect(upload_settings["data_dir"] / "uploads.sqlite3") as conn:
            conn.execute("CREATE TABLE grpo_uploads (id TEXT PRIMARY KEY, sha256 TEXT NOT NULL, size INTEGER NOT NULL, "
                         "filename TEXT NOT NULL, created_at REAL NOT NULL, data BLOB NOT NULL)")
            conn.execute("INSERT INTO grpo_uploads VALUES (?, ?, ?, 'o.json', 1.0, ?)",
                         (sha(old)[:16], sha(old), len(old), old))
    for _ in range(2):  # opened twice: the column is added once
        store = UploadStore.open(upload_settings["data_dir"], upload_settings.get("database_url"), quota_mb=8)
        assert store.backend.get(sha(old)[:16]) == old
        store.close()
    store = UploadStore.open(upload_settings["data_dir"], upload_settings.get("database_url"), quota_mb=8)
    entry, created = store.add(big, "big.json")
    assert created and store.backend.get(entry.id) == big and where(upload_settings, entry.id)[1] == 0
    assert store.total_bytes() == len(old) + len(big)
    assert [u.id for u in store.listing()] == [sha(old)[:16], entry.id]
    store.close()


def test_the_quota_counts_the_same_bytes_and_a_refusal_leaves_no_blob(upload_settings, backend):
    first, second = snapshot(5, pad=INLINE_MAX), snapshot(6, pad=INLINE_MAX)
    store = UploadStore(backend, quota_bytes=len(first) + len(second) - 1, cache_bytes=0)
    store.add(first)
    assert store.total_bytes() == len(first)
    with pytest.raises(UploadRejected) as full:
        store.add(second)
    assert full.value.status == 507 and store.total_bytes() == len(first)
    if "database_url" in upload_settings:
        assert large_objects(upload_settings) == 1  # the refused one's large object rolled back with its row
    else:
        assert sorted(p.name for p in (upload_settings["data_dir"] / "blobs").iterdir()) == [sha(first)]
    assert store.add(first)[1] is False  # bytes already stored are never refused


def test_deleting_an_upload_removes_its_blob(upload_settings, monkeypatch, capsys):
    monkeypatch.delenv("UPLOADS_DIR", raising=False)
    monkeypatch.setenv("DATA_DIR", str(upload_settings["data_dir"]))
    if "database_url" in upload_settings:
        monkeypatch.setenv("DATABASE_URL", upload_settings["database_url"])
    else:
        monkeypatch.delenv("DATABASE_URL", raising=False)
    store = UploadStore.open(upload_settings["data_dir"], upload_settings.get("database_url"))
    big, kept = snapshot(7, pad=INLINE_MAX), snapshot(8, pad=INLINE_MAX)
    gone_id, kept_id = store.add(big)[0].id, store.add(kept)[0].id
    assert uploads_cli.main(["delete", gone_id]) == 0 and f"deleted {gone_id}" in capsys.readouterr().out
    assert store.backend.get(gone_id) is None and store.get(gone_id) is None
    if "database_url" in upload_settings:
        assert large_objects(upload_settings) == 1
    else:
        assert not (upload_settings["data_dir"] / "blobs" / sha(big)).exists()
    assert store.backend.get(kept_id) == kept
    assert store.add(big)[1] is True and store.backend.get(gone_id) == big  # stored again: a new blob
    store.close()


def test_concurrent_big_uploads_never_pass_the_quota_nor_leave_a_blob(upload_settings):
    payloads = [snapshot(20 + i, pad=INLINE_MAX) for i in range(6)]
    quota = sum(len(p) for p in payloads[:3]) + 10  # room for three of the six, whichever come first
    store = UploadStore.open(upload_settings["data_dir"], upload_settings.get("database_url"))
    store.quota_bytes = quota
    outcomes: list[int] = []

    def send(raw: bytes) -> None:
        try:
            store.add(raw)
            outcomes.append(201)
        except UploadRejected as exc:
            outcomes.append(exc.status)

    threads = [threading.Thread(target=send, args=(raw,)) for raw in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == [201, 201, 201, 507, 507, 507]
    stored = {u.id for u in store.listing()}
    assert store.total_bytes() <= quota and len(stored) == 3
    if "database_url" in upload_settings:
        assert large_objects(upload_settings) == 3
    else:  # one file per stored upload, none for a refused one
        assert {p.name[:16] for p in (upload_settings["data_dir"] / "blobs").iterdir()} == stored
    assert all(store.backend.get(sha(raw)[:16]) == raw for raw in payloads if sha(raw)[:16] in stored)
    store.close()
