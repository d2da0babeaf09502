"""The run archive form's refusal without script (issue 49): the upload page again, the refusal at its top naming
the archive by the name the browser sent, why and what to do, the run form moved right under it (not twice), and
the blank run-upload.js fills in with script."""
from __future__ import annotations

import pytest
from archive_fixtures import tar_of, zip_of
from bs4 import BeautifulSoup


@pytest.fixture
def client(make_client, tmp_path):
    return make_client(data_dir=tmp_path, follow_redirects=False)


def test_an_archive_with_no_run_is_said_first_with_its_name_and_the_form_under_it(client):
    raw = zip_of([("notes/readme.txt", b"no run here")])
    r = client.post("/runs/new", files={"archive": ("holiday-notes.zip", raw, "application/zip")})
    assert r.status_code == 422 and r.headers["cache-control"] == "no-store"
    page = BeautifulSoup(r.text, "html.parser")
    box = page.select_one("#upload-refusal")
    assert box["role"] == "alert" and box.has_attr("autofocus")
    text = box.get_text(" ", strip=True)
    assert text.startswith("holiday-notes.zip was not opened as a run")
    assert "nothing here opens as a run" in text and "Choose another archive below" in text
    for href in ("#run-upload-what", "#how-to-record"):
        assert box.select_one(f"a[href='{href}']") is not None and page.select_one(href) is not None
    assert len(page.select("#run-upload-form")) == 1 and box.find_next_sibling()["id"] == "run-upload-form"
    assert page.select_one("#run-upload-file")["aria-invalid"] == "true"
    assert page.select_one(".run-upload-moved a[href='#run-upload-form']") is not None
    assert page.title.get_text().startswith("holiday-notes.zip was not opened as a run")


def test_a_hostile_archive_names_the_file_and_the_member(client):
    r = client.post("/runs/new", files={"archive": ("x.tar", tar_of([("run/../../evil", b"x")]), "application/x-tar")})
    assert r.status_code == 400
    box = BeautifulSoup(r.text, "html.parser").select_one("#upload-refusal")
    text = box.get_text(" ", strip=True)
    assert text.startswith("x.tar was not opened as a run") and "run/../../evil" in text
    assert "Make the archive again" in text


def test_the_script_has_a_blank_to_fill(client):
    page = BeautifulSoup(client.get("/walkthroughs/new").text, "html.parser")
    blank = page.select_one("template#run-upload-refusal")
    assert blank.select_one("[data-slot=file]") is not None and blank.select_one("[data-slot=why]") is not None
    assert "Choose another archive above" in blank.get_text(" ", strip=True)
    assert not blank.select("[id]")  # cloned beside the form: no id twice
    assert page.select_one("#run-upload-error")["tabindex"] == "-1"
