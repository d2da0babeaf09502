"""The record or snapshot form's refusal (issue 49), as the server renders it: at the top of the upload page under
its title, focused on load (autofocus, tabindex=-1, role=alert), naming the file as the browser sent it and the field
and reason, saying what to do with a link to how each format is made, and the form right under it; the check's own
words stay under #upload-error. Its words (views/upload_refusal.py) one by one."""
from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from app.views.upload_refusal import MAX_NAME, checked, file_name, record_refusal


@pytest.fixture
def client(make_client, tmp_path):
    return make_client(data_dir=tmp_path, follow_redirects=False)


def test_a_refused_file_is_said_first_naming_the_file_the_field_and_the_way_out(client):
    r = client.post("/walkthroughs/new", files={"file": ("hello.json", b'{"hello": 1}', "application/json")})
    assert r.status_code == 422 and r.headers["cache-control"] == "no-store"
    page = BeautifulSoup(r.text, "html.parser")
    box = page.select_one("#upload-refusal")
    assert box["role"] == "alert" and box["tabindex"] == "-1" and box.has_attr("autofocus")
    assert box.find_previous_sibling("h1")["id"] == "upload-title"  # right under the page's title
    assert [e.name for e in box.find_previous_siblings()] == ["h1"]
    text = box.get_text(" ", strip=True)
    assert box.select_one(".upload-refusal-file").get_text() == "hello.json"
    assert "the field format : Field required" in text and "Choose another file below" in text
    assert page.select_one("#upload-error").get_text() == "<upload>: format: Field required"
    link = box.select_one("a[href='#upload-formats']")
    assert link is not None and page.select_one("#upload-formats") is not None
    # the form right under it, the only one of its kind, its input marked and described by the reason
    form = box.find_next_sibling()
    assert form.name == "form" and form["id"] == "upload-form" and len(page.select("#upload-file")) == 1
    field = form.select_one("#upload-file")
    assert field["aria-invalid"] == "true" and page.select_one("#" + field["aria-describedby"]) is not None
    assert page.title.get_text().startswith("hello.json was not opened")


def test_the_file_as_a_whole_and_a_hostile_name(client):
    name = '<img src=x onerror=alert(1)>.json'
    r = client.post("/walkthroughs/new", files={"file": (name, b"{", "application/json")})
    assert r.status_code == 422 and "<img src=x" not in r.text
    box = BeautifulSoup(r.text, "html.parser").select_one("#upload-refusal")
    assert box.select_one(".upload-refusal-file").get_text() == name
    assert "the check stopped at the file as a whole: not valid JSON" in box.get_text(" ", strip=True)


def test_the_form_with_no_refusal_is_where_it_was(client):
    page = BeautifulSoup(client.get("/walkthroughs/new").text, "html.parser")
    assert page.select_one("#upload-refusal") is None
    assert page.select_one("#upload-form").find_previous_sibling()["id"] == "upload-formats"
    assert not page.select_one("#upload-file").has_attr("aria-invalid")


def test_the_name_shown_and_the_check_read():
    assert file_name("C:\\Users\\me\\run.json") == "run.json" and file_name("a/b/c.json") == "c.json"
    assert file_name("bad\x00\x1bname.json") == "badname.json" and file_name("") == "Your file"
    long = file_name("x" * 500 + ".json")
    assert len(long) == MAX_NAME and long.endswith("…")
    assert checked("<upload>: steps[2].view.camera.z: Field required") == ("steps[2].view.camera.z", "Field required")
    assert checked("upload storage is full") == (None, "upload storage is full")
    too_big = record_refusal("big.json", "a tensorviz snapshot may be at most 2 MB; this file is 3.0 MB", 413)
    assert too_big.field is None and too_big.words is None and "smaller" in too_big.todo
    assert "has none" in record_refusal("x.json", "<upload>: format: Field required", 422).why
