"""The run store (domain/run_store.py): a run's trainer_state.json kept once as the file it is, named by its
bytes' sha256, outside every database row; refused before a byte is written (by JSON path, past the size
limit, past the quota); written whole or not at all; a malformed id is no run."""
from __future__ import annotations

import hashlib
import json

import pytest
from run_fixtures import entry, healthy, state

from app.runs.domain.run_log import RunLogError
from app.runs.domain.run_store import RunRefused, RunStore, run_id


def raw(document: dict) -> bytes:
    return json.dumps(document).encode()


def test_the_id_is_the_content_and_a_second_add_is_the_same_run(tmp_path):
    store = RunStore(tmp_path / "runs")
    body = raw(healthy(12))
    ident, created = store.add(body)
    assert (ident, created) == (hashlib.sha256(body).hexdigest()[:16], True) and ident == run_id(body)
    assert store.path(ident).read_bytes() == body  # the file as given, not a re-serialisation
    assert store.add(body) == (ident, False)
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [f"{ident}.json"]  # no temporary left over
    other, _ = store.add(raw(healthy(13)))
    assert other != ident


def test_a_run_read_back_by_a_fresh_store_is_the_log_that_was_stored(tmp_path):
    body = raw(healthy(30))
    ident, _ = RunStore(tmp_path).add(body)
    log = RunStore(tmp_path).get(ident)  # another process: nothing cached, read from the file
    assert log is not None and log.steps == tuple(range(1, 31))
    assert log.series("kl") == tuple((s, 0.01 + 0.0005 * s) for s in range(1, 31))


def test_the_cache_keeps_the_last_few_and_rereads_the_rest(tmp_path):
    store = RunStore(tmp_path, keep=2)
    ids = [store.add(raw(healthy(n)))[0] for n in (5, 6, 7)]
    assert list(store._logs) == ids[1:]
    assert store.get(ids[0]).steps == tuple(range(1, 6))  # evicted, read again from its file
    assert list(store._logs) == [ids[2], ids[0]]


@pytest.mark.parametrize("ident", ["", "../../etc/passwd", "0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0",
                                   "0123456789abcdef.json", "0123456789abcdef\n"])
def test_a_malformed_or_unknown_id_is_no_run(tmp_path, ident):
    store = RunStore(tmp_path)
    assert store.get(ident) is None
    assert store.get("0123456789abcdef") is None  # well formed, never stored


def test_a_refused_log_names_its_field_and_stores_nothing(tmp_path):
    document = healthy(4)
    document["log_history"][1]["step"] = "two"
    store = RunStore(tmp_path / "runs")
    with pytest.raises(RunLogError, match=r"log_history\[1\]\.step"):
        store.add(raw(document))
    with pytest.raises(RunLogError):
        store.add(b"{not json")
    assert not (tmp_path / "runs").exists() and store.total_bytes() == 0


def test_past_the_size_limit_is_413_and_past_the_quota_507_nothing_written(tmp_path):
    small, big = raw(healthy(3)), raw(healthy(400))
    with pytest.raises(RunRefused) as too_big:
        RunStore(tmp_path / "a", max_bytes=len(big) - 1).add(big)
    assert too_big.value.status == 413 and not (tmp_path / "a").exists()
    store = RunStore(tmp_path / "b", quota_bytes=len(small) + len(big) - 1)
    store.add(small)
    with pytest.raises(RunRefused) as full:
        store.add(big)
    assert full.value.status == 507 and "nothing was stored" in str(full.value)
    assert store.total_bytes() == len(small)
    assert store.add(small) == (run_id(small), False)  # a run already stored is no new byte: never refused


def test_a_failed_write_leaves_no_file_and_no_temporary(tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    body = raw(state([entry(1), entry(2)]))

    def broken(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr("app.runs.domain.run_store.os.replace", broken)
    with pytest.raises(OSError, match="disk gone"):
        store.add(body)
    assert list(tmp_path.iterdir()) == [] and store.get(run_id(body)) is None


# -- listing and deleting (domain/run_listing.py, domain/run_deletion.py: `python -m app runs list|delete`) -------

def _disk(root) -> int:
    """What the quota counts without rows: every *.json in the store's folder, measured on disk."""
    return sum(p.stat().st_size for p in root.glob("*.json"))


def test_without_rows_a_run_counts_its_file_and_sidecars_and_delete_frees_exactly_that(tmp_path):
    from app.runs.domain.run_deletion import delete_run
    from app.runs.domain.run_listing import list_runs, usage

    root = tmp_path / "runs"
    store = RunStore(root, quota_bytes=10**6)
    a, _ = store.add(raw(healthy(20)))
    b, _ = store.add(raw(healthy(30)))
    store.link_records(a, {10: "aaaaaaaaaaaaaaaa"})
    store.add_derived(a, {10: {"tokens/mismatch_mean": 0.5}, 25: {"samples/tied_group_share": 0.25}})
    listed = {e.id: e for e in list_runs(store)}
    assert set(listed) == {a, b}
    assert listed[a].bytes == sum(store.path(a).with_suffix(s).stat().st_size for s in (".json", ".records.json",
                                                                                            ".derived.json"))
    assert listed[b].bytes == store.path(b).stat().st_size
    assert sum(e.bytes for e in listed.values()) == store.total_bytes() == _disk(root)
    assert listed[a].steps == (*range(1, 21), 25) and listed[a].recorded == {10: "aaaaaaaaaaaaaaaa"}
    assert listed[a].format == "TRL trainer_state.json + per-token and per-sample numbers"
    before = usage(store)
    assert (before.runs, before.used, before.quota) == (2, _disk(root), 10**6)
    assert before.share == pytest.approx(100 * _disk(root) / 10**6)
    assert store.get(a) is not None  # kept in memory
    gone = delete_run(store, a)
    assert gone.freed == listed[a].bytes == before.used - store.total_bytes()
    assert gone.unlinked == {10: "aaaaaaaaaaaaaaaa"} and not gone.row
    assert sorted(gone.files) == sorted(f"{a}{s}" for s in (".json", ".records.json", ".derived.json"))
    assert sorted(p.name for p in root.iterdir()) == [f"{b}.json"]
    assert store.get(a) is None and store.recorded(a) == {} and store.derived(a) == {}
    assert [e.id for e in list_runs(store)] == [b] and usage(store).runs == 1
    assert store.add(raw(healthy(20))) == (a, True)  # the same bytes again: a new run, as if never stored


@pytest.mark.parametrize("ident", ["../x", "../runs/x", "..", "/etc/passwd", "x", "0123456789ABCDEF",
                                   "0123456789abcde", "0123456789abcdef/../x", "0123456789abcdef\n"])
def test_an_id_that_is_no_run_deletes_nothing_inside_or_outside_the_store(tmp_path, ident):
    from app.runs.domain.run_deletion import UnknownRun, delete_run

    root = tmp_path / "data" / "runs"
    store = RunStore(root)
    kept, _ = store.add(raw(healthy(5)))
    bait = [tmp_path / "data" / "x.json", tmp_path / "data" / "x", tmp_path / "x.json", root / "x.json"]
    for p in bait:
        p.write_text("{}")
    with pytest.raises(UnknownRun):
        delete_run(store, ident)
    with pytest.raises(UnknownRun):
        delete_run(store, "0123456789abcdef")  # well formed, but no run has it
    assert all(p.read_text() == "{}" for p in bait) and store.get(kept) is not None


def test_a_log_kept_in_memory_is_not_served_once_another_process_deleted_its_run(tmp_path):
    from app.runs.domain.run_deletion import delete_run

    server, operator = RunStore(tmp_path), RunStore(tmp_path)
    ident, _ = server.add(raw(healthy(8)))
    assert server.get(ident) is not None and ident in server._logs
    delete_run(operator, ident)
    assert server.get(ident) is None


def test_each_source_is_named_as_the_stored_file_says():
    from app.runs.domain.run_listing import log_format
    from app.runs.engine.run_opening import RECORDS_ORIGIN
    from app.runs.engine.token_run import as_trainer_state

    def fmt(*sources: str) -> str:
        return log_format(json.loads(as_trainer_state({1: {"tokens/x": 1.0}}, sources)), set())

    assert fmt("prime-rl per-token files") == "prime-rl token exports"
    assert fmt("slime per-token files", "TRL completions tables") == "slime train_data and TRL completions tables"
    assert fmt("verl rollout dumps") == "verl rollout dumps"
    assert fmt("UNIPO canonical JSON (a.json, b.json)") == "UNIPO canonical JSON (a.json, b.json)"
    assert fmt(RECORDS_ORIGIN) == "step records alone (their own logged metrics)"
    assert log_format(healthy(3), set()) == "TRL trainer_state.json"
    assert log_format(healthy(3), {"tokens/k3"}) == "TRL trainer_state.json + per-token numbers"


def _rows(settings, query: str) -> list[tuple]:
    if "database_url" in settings:
        import psycopg

        with psycopg.connect(settings["database_url"], autocommit=True) as conn:
            return [tuple(r) for r in conn.execute(query).fetchall()]
    import sqlite3

    with sqlite3.connect(settings["data_dir"] / "uploads.sqlite3") as conn:
        return conn.execute(query).fetchall()


def test_with_rows_delete_takes_the_row_links_and_bytes_and_frees_what_was_listed(upload_settings):
    from app.runs.domain.run_deletion import delete_run
    from app.runs.domain.run_listing import list_runs
    from app.stores.uploads import open_backend

    root = upload_settings["data_dir"] / "runs"
    refs, server_refs = (open_backend(upload_settings["data_dir"], upload_settings.get("database_url"))
                         for _ in range(2))
    store, server = RunStore(root, refs=refs), RunStore(root, refs=server_refs)
    old = RunStore(root)  # a run stored before rows: adopted when listed
    legacy, _ = old.add(raw(healthy(7)))
    old.link_records(legacy, {7: "cccccccccccccccc"})
    a, _ = store.add(raw(healthy(20)), "/somewhere/out/trainer_state.json")
    b, _ = store.add(raw(healthy(30)))
    store.link_records(a, {10: "aaaaaaaaaaaaaaaa", 20: "bbbbbbbbbbbbbbbb"})
    store.add_derived(a, {10: {"tokens/mismatch_mean": 0.5}})
    pg = "database_url" in upload_settings
    objects = "SELECT count(*) FROM pg_largeobject_metadata"
    listed = {e.id: e for e in list_runs(store)}
    los = _rows(upload_settings, objects)[0][0] if pg else 0
    assert set(listed) == {a, b, legacy} and listed[legacy].recorded == {7: "cccccccccccccccc"}
    assert {i: e.bytes for i, e in listed.items()} == {i: store.path(i).stat().st_size for i in listed}
    assert sum(e.bytes for e in listed.values()) == store.total_bytes()
    assert listed[a].source == "/somewhere/out/trainer_state.json" and listed[a].steps == tuple(range(1, 21))
    assert server.get(a) is not None  # the server keeps it in memory
    used = store.total_bytes()
    gone = delete_run(store, a)
    assert gone.row and gone.freed == listed[a].bytes == used - store.total_bytes()
    assert gone.unlinked == {10: "aaaaaaaaaaaaaaaa", 20: "bbbbbbbbbbbbbbbb"} and gone.files == (f"{a}.json",)
    assert sorted(r[0] for r in _rows(upload_settings, "SELECT id FROM grpo_runs")) == sorted([b, legacy])
    assert _rows(upload_settings, "SELECT run_id, step FROM grpo_run_records") == [(legacy, 7)]
    if pg:  # its bytes in the database went with the row
        assert _rows(upload_settings, objects)[0][0] == los - 1
    assert not store.path(a).exists() and not list(root.glob(".*"))
    assert server.get(a) is None and server.recorded(a) == {} and server.derived(a) == {}
    assert store.recording("aaaaaaaaaaaaaaaa") is None
    assert delete_run(store, legacy).freed == listed[legacy].bytes
    assert not store.records_path(legacy).exists()  # its sidecar from before rows too
    assert [e.id for e in list_runs(store)] == [b] and store.total_bytes() == listed[b].bytes
    refs.close()
    server_refs.close()


def test_a_database_that_refuses_the_delete_leaves_the_run_as_it_was(tmp_path, monkeypatch):
    from app.runs.domain.run_deletion import delete_run
    from app.stores.uploads import StoreUnavailable, open_backend

    refs = open_backend(tmp_path)
    store = RunStore(tmp_path / "runs", refs=refs)
    ident, _ = store.add(raw(healthy(9)))

    def down(ident):
        raise StoreUnavailable("database gone")

    monkeypatch.setattr(refs, "delete_run", down)
    with pytest.raises(StoreUnavailable):
        delete_run(store, ident)
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [f"{ident}.json"]
    assert RunStore(tmp_path / "runs", refs=refs).get(ident) is not None
    refs.close()


def test_a_deletion_cut_short_is_listed_and_finished_by_deleting_again(tmp_path):
    from app.runs.domain.run_deletion import deletable, delete_run, staged
    from app.runs.domain.run_listing import list_runs
    from app.stores.uploads import open_backend

    refs = open_backend(tmp_path)
    store = RunStore(tmp_path / "runs", refs=refs)
    ident, _ = store.add(raw(healthy(6)))
    size = store.path(ident).stat().st_size
    store.path(ident).rename(staged(store, ident))  # the process died after setting the file aside
    (entry,) = list_runs(store)
    assert entry.id == ident and entry.bytes == size == store.total_bytes() and "missing" in entry.problem
    assert ident in deletable(store)
    gone = delete_run(store, ident)
    assert gone.freed == size and gone.row and store.total_bytes() == 0
    assert list((tmp_path / "runs").iterdir()) == [] and list_runs(store) == []
    refs.close()
