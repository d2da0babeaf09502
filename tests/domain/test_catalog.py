"""The catalog: one bad file never hides the good ones."""

import json
import logging
import shutil

import pytest
from paths import SEED_PATH as PATHS_SEED

from app.domain.catalog import Catalog, CatalogEntry, Featured, walkthrough_id_from_filename

SEED_PATH = PATHS_SEED


@pytest.mark.parametrize("name, expected", [
    ("toy_grpo.tensorviz.json", "toy_grpo"),
    ("other.json", "other"),
    ("a.b.json", "a.b"),
])
def test_id_from_filename(name, expected):
    assert walkthrough_id_from_filename(name) == expected


@pytest.fixture
def mixed_dir(tmp_path):
    shutil.copy(SEED_PATH, tmp_path / "toy_grpo.tensorviz.json")
    (tmp_path / "corrupt.json").write_text('{"format": ', encoding="utf-8")
    wrong = json.loads(SEED_PATH.read_text(encoding="utf-8"))
    wrong["format"] = "onnx"
    (tmp_path / "wrong_format.tensorviz.json").write_text(json.dumps(wrong), encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a walkthrough", encoding="utf-8")
    return tmp_path


def test_load_directory_keeps_every_file(mixed_dir, caplog):
    with caplog.at_level(logging.WARNING, logger="app.catalog"):
        catalog = Catalog.load_directory(mixed_dir)
    assert [e.id for e in catalog.entries()] == ["corrupt", "toy_grpo", "wrong_format"]

    good = catalog.get("toy_grpo")
    assert good.ok and good.error is None and good.source == "toy_grpo.tensorviz.json"
    assert catalog.snapshot("toy_grpo").name == "ToyGRPO"

    corrupt = catalog.get("corrupt")
    assert not corrupt.ok and corrupt.snapshot is None
    assert corrupt.error.startswith("corrupt.json: $: not valid JSON")

    wrong = catalog.get("wrong_format")
    assert not wrong.ok
    assert wrong.error.startswith("wrong_format.tensorviz.json: format: unsupported format 'onnx'")

    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "corrupt.json" in logged and "wrong_format.tensorviz.json" in logged


def test_lookups_refuse_unknown_and_failed(mixed_dir):
    catalog = Catalog.load_directory(mixed_dir)
    with pytest.raises(KeyError):
        catalog.get("nope")
    with pytest.raises(KeyError):
        catalog.snapshot("nope")
    with pytest.raises(KeyError):
        catalog.snapshot("corrupt")


def featured(catalog: Catalog) -> Catalog:
    """The catalog as an app sets it up: its kinds' featured walkthroughs (the toy's first)."""
    catalog.featured = (Featured("toy_grpo", "", "", rank=0), Featured("tiny_lm_grpo", "", "", rank=1))
    return catalog


def test_default_id_prefers_the_first_featured(tmp_path):
    shutil.copy(SEED_PATH, tmp_path / "a_first.json")
    shutil.copy(SEED_PATH, tmp_path / "toy_grpo.tensorviz.json")
    assert featured(Catalog.load_directory(tmp_path)).default_id == "toy_grpo"
    assert Catalog.load_directory(tmp_path).default_id == "a_first"  # none featured: the first that loads


def test_default_id_falls_back_to_first_ok(tmp_path):
    shutil.copy(SEED_PATH, tmp_path / "b_second.json")
    shutil.copy(SEED_PATH, tmp_path / "a_first.json")
    (tmp_path / "toy_grpo.tensorviz.json").write_text("[]", encoding="utf-8")
    catalog = featured(Catalog.load_directory(tmp_path))
    assert catalog.default_id == "a_first"  # the featured one failed to load
    assert not catalog.get("toy_grpo").ok


def test_default_id_none_when_nothing_loads(tmp_path):
    (tmp_path / "bad.json").write_text("nope", encoding="utf-8")
    assert Catalog.load_directory(tmp_path).default_id is None
    assert Catalog().default_id is None and Catalog().entries() == []


def test_duplicate_id_is_reported_not_hidden(tmp_path):
    shutil.copy(SEED_PATH, tmp_path / "toy_grpo.json")
    shutil.copy(SEED_PATH, tmp_path / "toy_grpo.tensorviz.json")
    catalog = Catalog.load_directory(tmp_path)
    first, second = catalog.entries()
    assert first.ok and catalog.get("toy_grpo") is first
    assert not second.ok and "duplicate walkthrough id 'toy_grpo'" in second.error


def test_missing_directory_is_empty_and_logged(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="app.catalog"):
        catalog = Catalog.load_directory(tmp_path / "absent")
    assert catalog.entries() == [] and catalog.default_id is None
    assert "does not exist" in caplog.text


def test_shipped_walkthroughs_all_load():
    catalog = featured(Catalog.load_directory(SEED_PATH.parent))
    assert catalog.entries() and all(e.ok for e in catalog.entries())
    assert catalog.default_id == "toy_grpo"


def test_entry_is_frozen():
    entry = CatalogEntry("x", "x.json", None, "x.json: $: bad")
    with pytest.raises(AttributeError):
        entry.id = "y"  # type: ignore[misc]


# -- things in the folder that are not readable walkthrough files ------------------

def test_odd_entries_in_the_folder_are_listed_with_their_error(tmp_path, caplog):
    import os

    shutil.copy(SEED_PATH, tmp_path / "toy_grpo.tensorviz.json")
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    (tmp_path / "folder.json").mkdir()
    (tmp_path / "loop.json").symlink_to(tmp_path / "loop.json")
    (tmp_path / "linked.json").symlink_to(tmp_path / "toy_grpo.tensorviz.json")  # a good link loads
    os.mkfifo(tmp_path / "pipe.json")  # reading it would block start-up for ever
    (tmp_path / "big_int.json").write_text(
        SEED_PATH.read_text(encoding="utf-8").replace('"revision": 0', '"revision": ' + "9" * 5000, 1))
    (tmp_path / "...json").write_bytes(SEED_PATH.read_bytes())  # id ".." would be /walkthroughs/..
    (tmp_path / "..json").write_bytes(SEED_PATH.read_bytes())   # id "."
    (tmp_path / ".json").write_bytes(SEED_PATH.read_bytes())    # id ""
    os.close(os.open(os.path.join(os.fsencode(tmp_path), b"latin\xe9.json"), os.O_CREAT | os.O_WRONLY))
    with caplog.at_level(logging.WARNING, logger="app.catalog"):
        catalog = featured(Catalog.load_directory(tmp_path))
    errors = {e.source: e.error for e in catalog.entries()}
    assert errors["dangling.json"] == "dangling.json: $: a symbolic link to nothing"
    assert errors["folder.json"] == "folder.json: $: a directory, not a file"
    assert errors["loop.json"].startswith("loop.json: $: cannot read file (")
    assert errors["pipe.json"] == "pipe.json: $: not a regular file"
    assert errors["linked.json"] is None and errors["toy_grpo.tensorviz.json"] is None
    assert "revision" in errors["big_int.json"] and "5000 digits" in errors["big_int.json"]
    for name, wid in (("...json", ".."), ("..json", "."), (".json", "")):
        assert errors[name] == f"{name}: $: the walkthrough id {wid!r} cannot be a URL path segment; rename the file"
    assert errors["latin\ufffd.json"] == "latin\ufffd.json: $: the file name is not valid UTF-8"
    for entry in catalog.entries():  # every id, source and error can go into a UTF-8 page
        f"{entry.id} {entry.source} {entry.error}".encode()
    assert catalog.default_id == "toy_grpo"
    assert "dangling.json" in caplog.text and "folder.json" in caplog.text


def test_a_folder_that_cannot_be_listed_is_an_empty_catalog(tmp_path, monkeypatch, caplog):
    import pathlib

    def refuse(self, pattern):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(pathlib.Path, "glob", refuse)
    with caplog.at_level(logging.WARNING, logger="app.catalog"):
        assert Catalog.load_directory(tmp_path).entries() == []
    assert "cannot list" in caplog.text
