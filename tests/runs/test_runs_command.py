"""`python -m app runs list|delete` (web/runs_command.py over domain/run_listing.py and run_deletion.py), end to end
through `python -m app`'s own main on a DATA_DIR of the test's: the listing's sizes are the files on disk and add up
to the quota's use (UPLOAD_QUOTA_MB read as the server reads it); a delete frees exactly what the listing said, the
run's pages answer 404 in a server that had it in memory, its recorded steps stay as uploads with their link gone;
an id that is no run (a path, "../x") deletes nothing, anywhere, and says which ids the store holds."""
from __future__ import annotations

import json
import shutil

from run_fixtures import healthy

from app.__main__ import main as app_main
from app.domain.uploads import MB
from app.runs.examples import RUN_DIR
from app.stores.uploads import open_backend


def _setup(tmp_path, monkeypatch, capsys, quota_mb: int = 1):
    """Two runs stored as `python -m app open` stores them: the shipped TRL run (120 steps, 4 recorded) and a
    25-step run of no recorded step. Returns (data dir, example's id, other's id)."""
    data = tmp_path / "data"
    monkeypatch.setenv("DATA_DIR", str(data))
    monkeypatch.setenv("UPLOAD_QUOTA_MB", str(quota_mb))
    other = tmp_path / "out"
    other.mkdir()
    (other / "trainer_state.json").write_text(json.dumps(healthy(25)))
    ids = []
    for folder in (RUN_DIR, other):
        assert app_main(["open", str(folder)]) == 0
        ids.append(capsys.readouterr().out.splitlines()[-1].rsplit("/runs/", 1)[1])
    return data, ids[0], ids[1]


def _listed(capsys) -> dict:
    assert app_main(["runs", "list", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_list_says_each_run_and_the_share_of_the_quota_the_files_on_disk_take(tmp_path, monkeypatch, capsys):
    data, example, other = _setup(tmp_path, monkeypatch, capsys)
    on_disk = {p.stem: p.stat().st_size for p in (data / "runs").glob("*.json")}
    assert set(on_disk) == {example, other}
    body = _listed(capsys)
    runs = {r["id"]: r for r in body["runs"]}
    assert {i: r["bytes"] for i, r in runs.items()} == on_disk
    assert body["usage"] == {"runs": 2, "bytes": sum(on_disk.values()), "quota_bytes": MB,
                             "share_percent": 100 * sum(on_disk.values()) / MB}
    assert body["other_bytes"] == 0
    ex = runs[example]
    assert ex["steps"] == {"count": 120, "first": 1, "last": 120} and ex["format"] == "TRL trainer_state.json"
    assert ex["source"] == str(RUN_DIR / "trainer_state.json") and ex["url"] == f"/runs/{example}"
    assert [r["step"] for r in ex["recorded"]] == [30, 60, 90, 120] and runs[other]["recorded"] == []
    assert ex["stored_at"].endswith("Z") and ex["problem"] is None

    assert app_main(["runs", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(f"{example}  120 steps (1-120)  ") and "recorded steps linked: 30, 60, 90, 120" in lines[0]
    assert lines[1].startswith(f"{other}  25 steps (1-25)  ") and "no recorded step" in lines[1]
    share = 100 * sum(on_disk.values()) / MB
    assert lines[2] == (f"2 runs, {sum(on_disk.values()) / MB:.1f} MB ({sum(on_disk.values()):,} bytes) of the 1 MB "
                        f"quota used ({share:.1f} %)")


def test_delete_frees_what_list_said_and_the_run_is_gone_from_a_server_that_had_it(
        tmp_path, monkeypatch, capsys, make_client):
    data, example, other = _setup(tmp_path, monkeypatch, capsys, quota_mb=2)
    before = _listed(capsys)
    listed = {r["id"]: r for r in before["runs"]}
    client = make_client(data_dir=data)
    assert client.get(f"/runs/{example}").status_code == 200  # read, and kept in the server's memory
    assert client.get(f"/api/runs/{example}").status_code == 200
    uploads = [r["upload"] for r in listed[example]["recorded"]]

    assert app_main(["runs", "delete", example]) == 0
    out = capsys.readouterr().out.splitlines()
    freed = listed[example]["bytes"]
    assert out[0].startswith(f"deleted run {example}: freed 0.1 MB ({freed:,} bytes) of the quota; removed "
                             f"{example}.json, its database row and links; /runs/{example} answers 404")
    assert out[1].startswith("  its 4 recorded steps stay in the upload store, unlinked from this run: step 30 at "
                             f"/walkthroughs/{uploads[0]}")
    assert out[1].endswith(f"(python -m app.uploads delete {' '.join(uploads)} removes them)")
    after = _listed(capsys)
    assert [r["id"] for r in after["runs"]] == [other]
    assert after["usage"]["bytes"] == before["usage"]["bytes"] - freed == listed[other]["bytes"]
    assert after["usage"]["share_percent"] == 100 * listed[other]["bytes"] / (2 * MB)
    assert out[2] == f"now: 1 run, {listed[other]['bytes'] / 1024:.1f} KB ({listed[other]['bytes']:,} bytes) of the " \
                     f"2 MB quota used ({after['usage']['share_percent']:.1f} %)"
    assert sorted(p.name for p in (data / "runs").iterdir() if p.is_file()) == [f"{other}.json"]
    assert client.get(f"/runs/{example}").status_code == 404
    assert client.get(f"/api/runs/{example}").status_code == 404
    assert client.get(f"/runs/{other}").status_code == 200
    backend = open_backend(data)
    try:  # the recorded steps stay, each its own upload; no run links them any more
        assert all(backend.exists(u) for u in uploads) and backend.run_records(example) == {}
    finally:
        backend.close()
    assert app_main(["open", str(RUN_DIR)]) == 0  # stored again: the same id, the same links
    assert capsys.readouterr().out.startswith(f"stored run {example}")
    assert client.get(f"/runs/{example}").status_code == 200


def test_an_unknown_id_or_a_path_deletes_nothing_and_names_the_runs_there(tmp_path, monkeypatch, capsys):
    data, example, other = _setup(tmp_path, monkeypatch, capsys)
    bait = [data / "x.json", data / "x", tmp_path / "x.json", data / "uploads.json"]
    for p in bait:
        p.write_text("{}")
    before = _listed(capsys)
    for ids in (["../x"], ["../../x.json"], [str(tmp_path / "x.json")], [".."], [example.upper()], [example[:6]],
                ["0123456789abcdef"], [other, "../x"]):
        assert app_main(["runs", "delete", *ids]) == 2
        err = capsys.readouterr().err
        assert err.rstrip().endswith(f"the store holds {', '.join(sorted([example, other]))} (python -m app runs "
                                     "list); nothing was deleted")
    assert "'../x': not a run id (16 hex digits)" in err
    assert app_main(["runs", "delete", example[:6]]) == 2
    assert f"did you mean {example}?" in capsys.readouterr().err
    assert all(p.read_text() == "{}" for p in bait)
    assert _listed(capsys) == before


def test_delete_json_and_an_empty_store(tmp_path, monkeypatch, capsys):
    data, example, other = _setup(tmp_path, monkeypatch, capsys)
    listed = {r["id"]: r["bytes"] for r in _listed(capsys)["runs"]}
    assert app_main(["runs", "delete", example, other, example, "--json"]) == 0  # an id twice is one deletion
    body = json.loads(capsys.readouterr().out)
    assert [d["id"] for d in body["deleted"]] == [example, other]
    assert body["freed"] == sum(listed.values()) and body["usage"] == {"runs": 0, "bytes": 0, "quota_bytes": MB,
                                                                      "share_percent": 0.0}
    assert [u["step"] for u in body["deleted"][0]["unlinked"]] == [30, 60, 90, 120]
    assert app_main(["runs", "list"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "0 runs, 0 MB (0 bytes) of the 1 MB quota used (0 %)"
    assert app_main(["runs", "delete", example]) == 2
    assert "the store holds no run; nothing was deleted" in capsys.readouterr().err
    shutil.rmtree(data / "runs")
    assert app_main(["runs", "list", "--json"]) == 0  # no runs folder at all
    assert json.loads(capsys.readouterr().out)["runs"] == []


def test_with_postgres_the_rows_and_large_object_go_and_the_quota_is_freed(tmp_path, monkeypatch, capsys,
                                                                           postgres_server):
    import psycopg

    url = postgres_server.create_database()
    monkeypatch.setenv("DATABASE_URL", url)
    data, example, other = _setup(tmp_path, monkeypatch, capsys)
    with psycopg.connect(url, autocommit=True) as conn:
        los = conn.execute("SELECT count(*) FROM pg_largeobject_metadata").fetchone()[0]
    before = _listed(capsys)
    freed = next(r["bytes"] for r in before["runs"] if r["id"] == example)
    assert app_main(["runs", "delete", example]) == 0
    capsys.readouterr()
    after = _listed(capsys)
    assert [r["id"] for r in after["runs"]] == [other]
    assert after["usage"]["bytes"] == before["usage"]["bytes"] - freed
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT id FROM grpo_runs").fetchall() == [(other,)]
        assert conn.execute("SELECT count(*) FROM grpo_run_records").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM pg_largeobject_metadata").fetchone()[0] == los - 1
        assert conn.execute("SELECT count(*) FROM grpo_uploads").fetchone()[0] == 4  # the recorded steps stay
