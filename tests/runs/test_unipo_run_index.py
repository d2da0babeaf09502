"""A UNIPO run is indexed once (issue 34): opened again with the same files and every record it linked still
stored, no entry is read (the reader and the record storing are replaced by ones that fail) and the run, its
links and the command's lines are the same, the records' checks left out and said so. A file touched or added, a
linked upload deleted, or an opening that refused an entry, and the files are read again."""
from __future__ import annotations

import copy
import json
import os

import pytest
from test_unipo_runs import opened, record_lines
from unipo_run_fixtures import expected_metrics, unipo_run, write

from app import uploads as uploads_cli
from app.runs.engine import run_opening, unipo_opening

INDEXED = "UNIPO canonical JSON unchanged since"


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    return tmp_path / "data"


def _no_reading(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("a UNIPO file was read again")
    monkeypatch.setattr(unipo_opening, "read_unipo_run", refuse)
    monkeypatch.setattr(unipo_opening, "store_unipo_records", refuse)


def _counting(monkeypatch) -> list:
    calls: list = []
    real = unipo_opening.read_unipo_run
    monkeypatch.setattr(unipo_opening, "read_unipo_run", lambda path: calls.append(path.name) or real(path))
    return calls


def _linked(lines: list[str]) -> dict[int, str]:
    """step -> upload id, as `open` printed each recorded step."""
    out = {}
    for line in lines:
        if line.startswith("recorded step "):
            head, rest = line.removeprefix("recorded step ").split(": ", 1)
            out[int(head)] = rest.split(" as ")[1].split()[0]
    return out


def _entries(data) -> list:
    return sorted((data / "runs" / "index").glob(f"{run_opening.UNIPO_INDEX}-*.json"))


def test_a_unipo_file_opened_again_reads_no_entry(tmp_path, data, capsys, make_client, monkeypatch):
    path = write(tmp_path / "unipo-grpo.json", unipo_run())
    first, err, url = opened(capsys, path)
    assert err == "" and not any(INDEXED in line for line in first)
    client = make_client(data_dir=data)
    before = client.get("/api" + url).json()
    _no_reading(monkeypatch)
    again, err, url_again = opened(capsys, path)
    assert err == "" and url_again == url
    assert again[0] == "already stored run " + first[0].removeprefix("stored run ")
    assert again[1:3] == first[1:3]  # the origin, and the file's entries and records, as the reading said them
    assert again[3].startswith(INDEXED + " it was read: ") and "each record's page recomputes its checks" in again[3]
    assert _linked(again) == _linked(first) and sorted(_linked(first)) == [4, 11, 23]
    for step in (4, 11, 23):
        assert record_lines(first, step) and record_lines(again, step) == []  # no check said that was not made
    assert [line for line in again if line.startswith("recorded step 11:")] == [
        f"recorded step 11: already stored as {_linked(first)[11]} (unipo-grpo.json entries[11])"]
    after = client.get("/api" + url).json()
    assert after == before
    expected = expected_metrics(path)  # the file's own numbers by json.load, not the index's
    assert {name: dict(after["metrics"][name]["points"]) for name in expected} == expected
    assert {r["step"]: r["url"] for r in after["recorded"]} == {r["step"]: r["url"] for r in before["recorded"]}
    assert all(client.get(r["url"]).status_code == 200 for r in after["recorded"])


def test_a_directory_of_unipo_files_opened_again_reads_none_and_an_added_file_is_read(tmp_path, data, capsys,
                                                                                      monkeypatch):
    folder = tmp_path / "out"
    doc = unipo_run()
    first, second = copy.deepcopy(doc), copy.deepcopy(doc)
    first["entries"], second["entries"] = doc["entries"][:15], doc["entries"][15:20]
    write(folder / "part-1.json", first)
    write(folder / "part-2.json", second, header_last=True)
    lines, _, url = opened(capsys, folder)
    assert "20 logged steps" in lines[0]
    with monkeypatch.context() as m:
        _no_reading(m)
        again, _, url_again = opened(capsys, folder)
    assert url_again == url and again[1:4] == lines[1:4]
    assert again[4].startswith(INDEXED + " they were read: ")
    third = copy.deepcopy(doc)
    third["entries"] = doc["entries"][20:]
    write(folder / "part-3.json", third)
    calls = _counting(monkeypatch)
    grown, _, url_grown = opened(capsys, folder)
    assert calls == ["part-1.json", "part-2.json", "part-3.json"]
    assert url_grown != url and "30 logged steps" in grown[0] and not any(INDEXED in line for line in grown)
    assert sorted(_linked(grown)) == [4, 11, 23]
    calls.clear()
    again, _, _ = opened(capsys, folder)
    assert calls == [] and any(INDEXED in line for line in again)


def test_a_touched_file_is_read_again(tmp_path, data, capsys, monkeypatch):
    path = write(tmp_path / "run.json", unipo_run())
    lines, _, url = opened(capsys, path)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # the same bytes, a later time
    calls = _counting(monkeypatch)
    again, _, url_again = opened(capsys, path)
    assert calls == ["run.json"] and url_again == url
    assert not any(INDEXED in line for line in again) and record_lines(again, 4) == record_lines(lines, 4)
    calls.clear()
    opened(capsys, path)
    assert calls == []  # indexed again under the new time


def test_a_deleted_upload_makes_the_file_read_again_and_stored_again(tmp_path, data, capsys, make_client,
                                                                     monkeypatch):
    path = write(tmp_path / "run.json", unipo_run())
    lines, _, url = opened(capsys, path)
    gone = _linked(lines)[11]
    assert uploads_cli.main(["delete", gone]) == 0
    capsys.readouterr()
    calls = _counting(monkeypatch)
    again, err, url_again = opened(capsys, path)
    assert calls == ["run.json"] and err == "" and url_again == url
    assert f"recorded step 11: stored as {gone} (run.json entries[11])" in again  # the same bytes, the same id
    assert f"recorded step 4: already stored as {_linked(lines)[4]} (run.json entries[4])" in again
    api = make_client(data_dir=data).get("/api" + url).json()
    assert make_client(data_dir=data).get(next(r["url"] for r in api["recorded"] if r["step"] == 11)).status_code == 200


def test_an_opening_that_refused_an_entry_is_never_kept(tmp_path, data, capsys, monkeypatch):
    doc = unipo_run()
    good = copy.deepcopy(doc)
    tokens = doc["entries"][11]["prompts"][0]["responses"][1]["tokens"]
    tokens["log_probs"] = tokens["log_probs"][:3]
    path = write(tmp_path / "run.json", doc)
    calls = _counting(monkeypatch)
    for n in (1, 2):
        lines, err, _ = opened(capsys, path, code=1)
        assert calls == ["run.json"] * n  # read at each opening
        assert "entries[11].prompts[0].responses[1].tokens.log_probs: 3 values" in err  # and said each time
        assert not any(INDEXED in line for line in lines)
    assert _entries(data) == []
    write(path, good)  # fixed: read once more, then kept
    opened(capsys, path)
    opened(capsys, path)
    assert calls == ["run.json"] * 3 and len(_entries(data)) == 1


def test_a_refused_file_of_a_directory_is_never_kept(tmp_path, data, capsys, monkeypatch):
    folder = tmp_path / "out"
    write(folder / "a.json", unipo_run())
    (folder / "b.json").write_text('{"header": {}, "entries": [{"step": 0, "metrics": {"kl": "high"}}]}')
    calls = _counting(monkeypatch)
    for _ in range(2):
        _, err, _ = opened(capsys, folder, code=1)
        assert f"{folder / 'b.json'}: entries[0].metrics.kl: must be a number" in err
    assert calls == ["a.json", "b.json"] * 2 and _entries(data) == []


def test_the_index_entry_is_small_json_without_arrays(tmp_path, data, capsys):
    path = write(tmp_path / "run.json", unipo_run())
    lines, _, _ = opened(capsys, path)
    (entry,) = _entries(data)
    text = entry.read_text()
    values = sum(len(by_step) for by_step in expected_metrics(path).values())  # every metric logged, by json.load
    assert len(text) < 64 * values + 1024  # a metric's name and number each, and a few lines: no entry's arrays

    def no_arrays(value, where="value"):
        assert not isinstance(value, list), where
        if isinstance(value, dict):
            for k, v in value.items():
                no_arrays(v, f"{where}.{k}")
    value = json.loads(text)["value"]
    no_arrays(value)
    assert {at: r["upload"] for at, r in value["linked"].items()} == {
        f"run.json entries[{s}]": ident for s, ident in _linked(lines).items()}
    assert json.loads(text)["files"] == {"run.json": [path.stat().st_size, path.stat().st_mtime_ns]}


def test_an_index_entry_that_is_not_whole_is_read_again(tmp_path, data, capsys, monkeypatch):
    path = write(tmp_path / "run.json", unipo_run())
    _, _, url = opened(capsys, path)
    (entry,) = _entries(data)
    whole = json.loads(entry.read_text())
    entry.write_text(json.dumps({**whole, "value": {"origin": whole["value"]["origin"]}}))  # no metrics, no links
    calls = _counting(monkeypatch)
    again, _, url_again = opened(capsys, path)
    assert calls == ["run.json"] and url_again == url and not any(INDEXED in line for line in again)
    assert json.loads(entry.read_text()) == whole  # written whole again
