"""A run referenced from the database (domain/run_store.py with the upload store's backend as `refs`).

On SQLite and PostgreSQL: the run is a row (id, sha256, size, name) and its recorded steps and derived numbers
are rows, not sidecar files, read back by a fresh store; a run stored before rows (file and sidecars, no row) is
adopted on first read with its links and numbers; the quota counts runs with and without rows; a run file
changed on disk is refused on SQLite and restored from the large object on PostgreSQL. On PostgreSQL, two
"replicas" (two stores with their own data directories on one database) see the same run, its recorded steps
and its derived numbers."""
from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest
from run_fixtures import healthy

from app.runs.domain.run_store import RunRefused, RunStore, run_id
from app.stores.uploads import open_backend

LINKS = {30: "aaaaaaaaaaaaaaaa", 60: "bbbbbbbbbbbbbbbb"}
DERIVED = {30: {"tokens/mismatch_mean": 0.125}, 60: {"tokens/mismatch_mean": -0.5, "samples/tied_group_share": 0.25}}


def raw(n: int) -> bytes:
    return json.dumps(healthy(n)).encode()


@pytest.fixture
def open_refs(upload_settings):
    """open_refs(data_dir=None): the backend of these settings (a data directory of its own when given)."""
    opened = []

    def make(data_dir=None):
        backend = open_backend(data_dir or upload_settings["data_dir"], upload_settings.get("database_url"))
        opened.append(backend)
        return backend
    yield make
    for backend in opened:
        backend.close()


def rows(upload_settings, query: str, *args) -> list[tuple]:
    if "database_url" in upload_settings:
        import psycopg

        with psycopg.connect(upload_settings["database_url"], autocommit=True) as conn:
            return [tuple(r) for r in conn.execute(query.replace("?", "%s"), args).fetchall()]
    with sqlite3.connect(upload_settings["data_dir"] / "uploads.sqlite3") as conn:
        return conn.execute(query, args).fetchall()


def test_a_run_and_its_links_are_rows_a_fresh_store_reads(upload_settings, open_refs):
    root = upload_settings["data_dir"] / "runs"
    store = RunStore(root, refs=open_refs())
    body = raw(60)
    ident, created = store.add(body, "trainer_state.json")
    assert created and store.add(body) == (ident, False)
    assert store.path(ident).read_bytes() == body  # the file stays content-addressed on disk
    assert rows(upload_settings, "SELECT id, sha256, size, name FROM grpo_runs") == [
        (ident, hashlib.sha256(body).hexdigest(), len(body), "trainer_state.json")]
    assert store.link_records(ident, {30: "0" * 16}) == {30: "0" * 16}
    assert store.link_records(ident, LINKS) == LINKS  # a step linked again points at its newer upload
    store.add_derived(ident, {30: {"tokens/mismatch_mean": 9.0}})
    store.add_derived(ident, DERIVED)
    assert not store.records_path(ident).exists() and not store.derived_path(ident).exists()  # no sidecars
    assert rows(upload_settings, "SELECT step, upload_id FROM grpo_run_records WHERE run_id = ? ORDER BY step",
                ident) == sorted(LINKS.items())
    fresh = RunStore(root, refs=open_refs())  # another process
    assert fresh.recorded(ident) == LINKS and fresh.derived(ident) == DERIVED
    log = fresh.get(ident)
    assert log is not None and log.steps == tuple(range(1, 61))
    assert log.series("tokens/mismatch_mean") == ((30, 0.125), (60, -0.5))
    assert fresh.recorded("0123456789abcdef") == {} and fresh.get("0123456789abcdef") is None
    assert fresh.recorded("../../etc/passwd") == {} and fresh.get("../x") is None
    with pytest.raises(KeyError):
        fresh.link_records("0123456789abcdef", LINKS)


def test_a_run_stored_before_rows_is_adopted_with_its_links_and_numbers(upload_settings, open_refs):
    root = upload_settings["data_dir"] / "runs"
    old = RunStore(root)  # the store as it was: files and sidecars only
    body = raw(60)
    ident, _ = old.add(body)
    old.link_records(ident, LINKS)
    old.add_derived(ident, DERIVED)
    store = RunStore(root, refs=open_refs())
    assert rows(upload_settings, "SELECT id FROM grpo_runs") == []
    assert store.total_bytes() == len(body)  # counted against the quota before it has a row
    assert store.recorded(ident) == LINKS  # first touch: adopted
    assert rows(upload_settings, "SELECT id, size FROM grpo_runs") == [(ident, len(body))]
    assert store.total_bytes() == len(body)  # once, not twice
    log = RunStore(root, refs=open_refs()).get(ident)
    assert log is not None and log.series("samples/tied_group_share") == ((60, 0.25),)
    assert store.add(body) == (ident, False)


def test_the_quota_counts_runs_and_a_refusal_leaves_nothing(upload_settings, open_refs):
    root = upload_settings["data_dir"] / "runs"
    small, big = raw(3), raw(400)
    store = RunStore(root, refs=open_refs(), quota_bytes=len(small) + len(big) - 1)
    store.add(small)
    with pytest.raises(RunRefused) as full:
        store.add(big)
    assert full.value.status == 507 and store.total_bytes() == len(small)
    assert not store.path(run_id(big)).exists() and store.get(run_id(big)) is None
    assert [r[0] for r in rows(upload_settings, "SELECT id FROM grpo_runs")] == [run_id(small)]
    assert store.add(small) == (run_id(small), False)


def test_a_run_file_changed_on_disk_is_never_shown_as_the_run(upload_settings, open_refs):
    root = upload_settings["data_dir"] / "runs"
    body = raw(40)
    ident, _ = RunStore(root, refs=open_refs()).add(body)
    changed = body.replace(b'"step": 40', b'"step": 41', 1)
    assert changed != body and len(changed) == len(body)
    RunStore(root).path(ident).write_bytes(changed)
    log = RunStore(root, refs=open_refs()).get(ident)
    if "database_url" in upload_settings:  # restored from the large object, and the file made good
        assert log is not None and log.steps[-1] == 40
        assert RunStore(root).path(ident).read_bytes() == body
    else:  # one machine, no other copy: refused (and logged)
        assert log is None
        RunStore(root, refs=open_refs()).add(body)  # opened again: the file made good from the bytes in hand
        assert RunStore(root, refs=open_refs()).get(ident).steps[-1] == 40


def test_two_replicas_on_one_postgres_see_one_run(postgres_server, tmp_path):
    url = postgres_server.create_database()
    a_refs, b_refs = open_backend(tmp_path / "a", url), open_backend(tmp_path / "b", url)
    a, b = RunStore(tmp_path / "a" / "runs", refs=a_refs), RunStore(tmp_path / "b" / "runs", refs=b_refs)
    body = raw(60)
    ident, _ = a.add(body)
    a.link_records(ident, LINKS)
    a.add_derived(ident, DERIVED)
    assert not b.path(ident).exists()
    log = b.get(ident)
    assert log is not None and log.steps == tuple(range(1, 61)) and log.series("kl")[-1] == (60, 0.01 + 0.0005 * 60)
    assert log.series("tokens/mismatch_mean") == ((30, 0.125), (60, -0.5))
    assert b.recorded(ident) == LINKS and b.path(ident).read_bytes() == body  # its own copy, the same bytes
    assert b.link_records(ident, {90: "cccccccccccccccc"}) == LINKS | {90: "cccccccccccccccc"}
    assert a.recorded(ident) == LINKS | {90: "cccccccccccccccc"}  # links are shared both ways
    assert b.add(body) == (ident, False) and b.total_bytes() == a.total_bytes() == len(body)
    a_refs.close()
    b_refs.close()
