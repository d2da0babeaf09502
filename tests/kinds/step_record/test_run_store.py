"""The run store (domain/run_store.py): a run's trainer_state.json kept once as the file it is, named by its
bytes' sha256, outside every database row; refused before a byte is written (by JSON path, past the size
limit, past the quota); written whole or not at all; a malformed id is no run."""
from __future__ import annotations

import hashlib
import json

import pytest
from run_fixtures import entry, healthy, state

from app.kinds.step_record.domain.run_log import RunLogError
from app.kinds.step_record.domain.run_store import RunRefused, RunStore, run_id


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

    monkeypatch.setattr("app.kinds.step_record.domain.run_store.os.replace", broken)
    with pytest.raises(OSError, match="disk gone"):
        store.add(body)
    assert list(tmp_path.iterdir()) == [] and store.get(run_id(body)) is None
