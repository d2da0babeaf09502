"""A whole UNIPO canonical file opened as a run (issue 34): every entry's metrics are the run's log, each entry
holding prompts (or every entry, with a blueprint) a step record linked to its step, whose checks are those of
the same entry opened as a single UNIPO file. The file is read one entry at a time (ijson), the header wherever
it is. A file whose log would be wrong is refused by UNIPO's path with nothing stored; an entry whose record is
refused is named by the whole file's path, the rest stored; a single-step UNIPO file still opens as its record."""
from __future__ import annotations

import copy
import json

import pytest
from bs4 import BeautifulSoup
from unipo_fixture import FIXTURE
from unipo_run_fixtures import expected_metrics, unipo_run, with_prompts, write

from app import uploads as uploads_cli
from app.__main__ import main as app_main
from app.kinds.step_record.examples import HERE as EXAMPLES_DIR
from app.runs.domain.unipo_run import is_unipo_file, opens_as_run, unipo_files

PORT = "8125"


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    return tmp_path / "data"


def opened(capsys, path, code=0):
    assert app_main(["open", str(path), "--port", PORT]) == code
    out, err = capsys.readouterr()
    lines = out.splitlines()
    url = lines[-1].removeprefix(f"open http://127.0.0.1:{PORT}") if lines else ""
    return lines, err, url


def nothing_stored(data, capsys):
    runs = data / "runs"
    assert not runs.exists() or not list(runs.glob("*.json"))
    assert uploads_cli.main(["usage"]) == 0
    assert "uploads: 0" in capsys.readouterr().out


def record_lines(lines: list[str], step: int) -> list[str]:
    """The checks `open` printed under one recorded step, unindented."""
    start = next(i for i, line in enumerate(lines) if line.startswith(f"recorded step {step}:"))
    block = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        block.append(line[2:])
    return block


def test_every_metric_is_the_files_and_each_entry_with_prompts_is_a_linked_record(tmp_path, data, capsys,
                                                                                 make_client):
    path = write(tmp_path / "unipo-grpo.json", unipo_run())
    lines, err, url = opened(capsys, path)
    assert err == ""
    assert lines[0].startswith("stored run ") and f"{path}: 30 logged steps (0 to 29)" in lines[0]
    assert lines[1] == "no trainer log: the run's metrics are UNIPO canonical JSON (unipo-grpo.json)"
    assert lines[2] == "UNIPO canonical JSON unipo-grpo.json: 30 entries, 3 holding prompts (each a step record)"
    client = make_client(data_dir=data)
    api = client.get("/api" + url).json()
    expected = expected_metrics(path)
    assert set(api["metrics"]) == set(expected)
    for name, by_step in expected.items():
        got = {s: v for s, v in api["metrics"][name]["points"]}
        assert got == by_step, name  # every value, bit for bit, and no step where the file logged null
    assert "kl" in expected and 3 not in expected["kl"]
    recorded = with_prompts(path)
    assert [r["step"] for r in api["recorded"]] == [s for s, _ in recorded] == [4, 11, 23]
    for step, entry in recorded:
        block = record_lines(lines, step)
        assert block and not any(line.startswith("BAD") for line in block)
        assert sum(line.startswith("ok ") for line in block) >= 8
        # the same entry as a single UNIPO file: the same record, the same checks
        single = write(tmp_path / f"single-{step}.json", {"header": json.loads(path.read_text())["header"],
                                                          "entries": [entry]})
        single_lines, _, _ = opened(capsys, single)
        assert single_lines[0].startswith("already stored as ")  # the very upload the run linked
        assert single_lines[1:-1] == block
    for r in api["recorded"]:
        assert client.get(r["url"]).status_code == 200


def test_the_header_after_the_entries_and_a_blueprint_for_every_entry(tmp_path, data, capsys, make_client):
    doc = unipo_run(steps=3, recorded=(1,))
    doc["blueprint"] = {"prompts": doc["entries"][1].pop("prompts")}
    doc["entries"][0]["metrics"] = copy.deepcopy(doc["entries"][1]["metrics"])
    doc["entries"][2]["metrics"] = copy.deepcopy(doc["entries"][1]["metrics"])
    path = write(tmp_path / "run.json", doc, header_last=True)
    assert path.read_text().index('"header"') > path.read_text().index('"entries"')
    lines, err, url = opened(capsys, path)
    assert err == "" and "3 entries, 3 using the blueprint or holding prompts" in lines[2]
    assert [int(line.split()[2].rstrip(":")) for line in lines if line.startswith("recorded step")] == [0, 1, 2]
    api = make_client(data_dir=data).get("/api" + url).json()
    assert [r["step"] for r in api["recorded"]] == [0, 1, 2]


@pytest.mark.parametrize(("change", "where"), [
    (lambda d: d["entries"][12]["metrics"].__setitem__("kl", "high"),
     "entries[12].metrics.kl: must be a number (or null), not a string"),
    (lambda d: d["entries"][12]["metrics"].__setitem__("reward", True),
     "entries[12].metrics.reward: must be a number (or null), not a boolean"),
    (lambda d: d["entries"][5].__setitem__("step", -1), "entries[5].step: must be an integer ≥ 0, not -1"),
    (lambda d: d["entries"][5].__setitem__("step", 2), "entries[5].step: 2 after 4: steps must not go back"),
    (lambda d: d["entries"][5].pop("step"), "entries[5].step: missing"),
    (lambda d: d["entries"].__setitem__(7, [7]), "entries[7]: must be an object, not a list"),
    (lambda d: d["entries"][7].__setitem__("metrics", [1]), "entries[7].metrics: must be an object, not a list"),
    (lambda d: d.pop("header"), "header: missing"),
    (lambda d: d.__setitem__("header", "grpo"), "header: must be an object, not a string"),
    (lambda d: d.__setitem__("blueprint", {"prompts": {}}), "blueprint.prompts: must be a list, not an object"),
])
def test_a_file_whose_log_would_be_wrong_is_refused_by_its_path_and_nothing_is_stored(tmp_path, data, capsys,
                                                                                      change, where):
    doc = unipo_run()
    change(doc)
    path = write(tmp_path / "bad.json", doc)
    _, err, _ = opened(capsys, path, code=1)
    assert f"error: {path}: {where}" in err
    nothing_stored(data, capsys)


def test_two_entries_of_one_step_must_agree(tmp_path, data, capsys):
    doc = unipo_run()
    doc["entries"][6] = {"step": 5, "metrics": {"reward": doc["entries"][5]["metrics"]["reward"]}}  # agrees: kept
    path = write(tmp_path / "same.json", doc)
    lines, _, _ = opened(capsys, path)
    assert "29 logged steps" in lines[0]
    doc["entries"][6]["metrics"]["reward"] += 0.5
    path = write(tmp_path / "differ.json", doc)
    _, err, _ = opened(capsys, tmp_path / "differ.json", code=1)
    assert "entries[6].metrics.reward: " in err and "logged for step 5 at entries[5]" in err


@pytest.mark.parametrize(("text", "where"), [
    ('{"header": {}, "entries": [{"step": 0, "metrics": {"kl": 0.1}}, {"step": 1, "metrics": {"kl": NaN}}]}',
     "entries[1]: not JSON: lexical error: invalid char in json text. (NaN and Infinity are not JSON"),
    ('{"header": {}, "entries": [{"step": 0, "metrics": {"kl": 0.1}}, {"step": 1, "met',
     "entries[1]: not JSON: "),
    ('{"header": {}, "entries": []}', "entries: holds no entry: nothing to open"),
    ('{"header": {}, "entries": {"step": 0}}', "entries: must be a list, not an object"),
])
def test_bytes_that_are_no_run_are_refused_by_path_in_a_directory_too(tmp_path, data, capsys, text, where):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "unipo.json").write_text(text)
    _, err, _ = opened(capsys, folder, code=1)
    assert f"error: {folder / 'unipo.json'}: {where}" in err
    nothing_stored(data, capsys)


def test_an_entry_whose_record_is_refused_is_named_and_the_rest_stored(tmp_path, data, capsys):
    doc = unipo_run()
    tokens = doc["entries"][11]["prompts"][0]["responses"][1]["tokens"]
    tokens["log_probs"] = tokens["log_probs"][:3]
    path = write(tmp_path / "one-bad.json", doc)
    lines, err, _ = opened(capsys, path, code=1)
    assert (f"error: {path}: entries[11].prompts[0].responses[1].tokens.log_probs: 3 values, but tokens.ids has "
            in err) and "(step 11 not linked; its metrics are in the run)" in err
    assert [line.split(":")[0] for line in lines if line.startswith("recorded step")] == ["recorded step 4",
                                                                                         "recorded step 23"]
    assert "30 logged steps" in lines[0]
    doc = unipo_run()
    doc["header"]["hparams"]["clip_eps"] = "wide"
    path = write(tmp_path / "bad-header.json", doc)
    _, err, _ = opened(capsys, path, code=1)
    assert err.count("header.hparams.clip_eps") == 1 and "(no entry's step record can be made)" in err


def test_a_single_step_unipo_file_still_opens_as_its_record(data, capsys):
    for path in (FIXTURE, EXAMPLES_DIR / "unipo-grpo-step-7.json"):
        assert not opens_as_run(path, 32 * 1024 * 1024)
        lines, err, url = opened(capsys, path)
        assert lines[0].startswith(("stored as ", "already stored as ")) and "step 7: 2 groups" in lines[1]
        assert url.startswith("/walkthroughs/") and err == ""


def test_a_directory_of_unipo_files_is_one_run_and_unipo_files_are_told_by_their_keys(tmp_path, data, capsys,
                                                                                     make_client):
    folder = tmp_path / "out"
    doc = unipo_run()
    first, second = copy.deepcopy(doc), copy.deepcopy(doc)
    first["entries"], second["entries"] = doc["entries"][:15], doc["entries"][15:]
    write(folder / "part-1.json", first)
    write(folder / "part-2.json", second, header_last=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "entries": 3}))
    (folder / "trainer_state.json.bak").write_text("{}")
    (folder / "step-1.grpo-step.json").write_text('{"header": {}, "entries": []}')
    assert [p.name for p in unipo_files(folder)] == ["part-1.json", "part-2.json"]
    assert not is_unipo_file(FIXTURE.with_name("nowhere.json"))
    assert not is_unipo_file(EXAMPLES_DIR / "trl-1.16-run" / "trainer_state.json")
    assert not is_unipo_file(EXAMPLES_DIR / "trl-1.16-step-2.grpo-step.json")
    lines, err, url = opened(capsys, folder)
    assert err == "" and "30 logged steps (0 to 29)" in lines[0]
    assert "UNIPO canonical JSON (part-1.json, part-2.json)" in lines[1]
    page = make_client(data_dir=data).get(url + "?step=11")
    soup = BeautifulSoup(page.text, "html.parser")
    assert page.status_code == 200 and soup.h1.get_text(strip=True) == "A GRPO run: 30 logged steps"
    assert [a.get_text(" ", strip=True) for a in soup.select(".run-record-link")] == [
        "Step 4’s tokens", "Step 11’s tokens", "Step 23’s tokens"]
    assert soup.select_one(".run-step-record a.primary") is not None  # step 11 selected: its record one click away
    row = next(tr for tr in soup.select(".run-step-table tr") if tr.find(string="reward"))
    assert row.td.get_text(strip=True) != "—"


def test_each_record_is_told_whole_as_it_is_stored_and_kept_without_its_payload(tmp_path):
    """A 1 GB UNIPO file holds hundreds of records: the run keeps their ids and steps, not their arrays."""
    from app.domain.uploads import UploadStore
    from app.house import registry
    from app.runs.domain.run_store import RunStore
    from app.runs.engine.run_opening import open_run_dir

    path = write(tmp_path / "run.json", unipo_run())
    kinds = registry()
    uploads = UploadStore.open(tmp_path / "data", None, quota_mb=64, cache_mb=0)
    uploads.classify, uploads.readers = kinds.classify, kinds.readers
    seen: list[tuple[int, int]] = []
    try:
        opened = open_run_dir(path, RunStore(tmp_path / "data" / "runs"), uploads,
                              on_record=lambda r: seen.append((r.step, r.entry.payload.run.step)))
    finally:
        uploads.close()
    assert seen == [(4, 4), (11, 11), (23, 23)]
    assert [r.step for r in opened.records] == [4, 11, 23] and all(r.entry.payload is None for r in opened.records)
    assert sorted(opened.recorded) == [4, 11, 23] and opened.refused == ()
    assert opened.origin == "UNIPO canonical JSON (run.json)" and opened.unipo[0].entries == 30
