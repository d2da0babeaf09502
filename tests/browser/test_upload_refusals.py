"""A refused upload never looks like nothing happened (issue 49): at 390×844, 1280×720 and 1920×1080, with script and
without, every file form of the upload page (the record or snapshot file, the whole-run archive) answers a refusal
with a message inside the first view, focused, that names the file and the reason and says the way out (a link to
how such a file is made, the form right there to choose another). Screenshots: test-output/screenshots/refusals/."""
from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-output" / "screenshots" / "refusals"
SIZES = {"phone": (390, 844), "laptop": (1280, 720), "desktop": (1920, 1080)}
NOT_A_RUN = "nothing here opens as a run"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """`{"hello": 1}` (JSON, but no format this app opens) and two archives with no run inside."""
    folder = tmp_path_factory.mktemp("refused")
    (folder / "hello.json").write_text('{"hello": 1}')
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("notes/readme.txt", "no run in here")
    (folder / "no-run.zip").write_bytes(buf.getvalue())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        data = b"no run in here either"
        info = tarfile.TarInfo("holiday/readme.txt")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    (folder / "no-run.tar.gz").write_bytes(buf.getvalue())
    return {p.name: p for p in folder.iterdir()}


def refuse(page: Page, field: str, path: Path) -> Locator:
    """Choose `path` in the file input `field`, send its form, and return the message that names the file."""
    page.goto("/walkthroughs/new")
    page.locator(field).set_input_files(str(path))
    button = page.locator(field).locator("xpath=ancestor::form[1]//button[@type='submit']")
    with page.expect_response(lambda r: r.request.method == "POST"):
        button.click()
    page.wait_for_load_state()
    message = page.locator("[role=alert]", has_text=path.name)
    expect(message).to_be_visible()
    return message


def in_view(page: Page, target: Locator) -> dict:
    """The box of `target` against the viewport (whole, not cut at any edge)."""
    box = target.bounding_box()
    assert box is not None
    size = page.viewport_size
    assert size is not None
    return {"y": round(box["y"]), "bottom": round(box["y"] + box["height"]), "height": size["height"],
            "inside": box["y"] >= 0 and box["x"] >= 0 and box["y"] + box["height"] <= size["height"]
            and box["x"] + box["width"] <= size["width"]}


def check(page: Page, message: Locator, name: str, reason: list[str], field: str, shot: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{shot}.png"), caret="initial")
    where = in_view(page, message)
    assert where["inside"], f"{name}: the message is not inside the first view: {where}"
    text = message.inner_text()
    assert name in text, text
    for words in reason:
        assert words in text, (words, text)
    # reader's focus on it, for a screen reader and the keyboard
    assert message.evaluate("el => el.contains(document.activeElement)"), "the message is not focused"
    # the way out: a link to how such a file is made (to an element of this page, or a page of this site), and the
    # form right there to choose another file
    links = message.locator("a[href]")
    assert links.count() >= 1, text
    for href in links.evaluate_all("as => as.map(a => a.getAttribute('href'))"):
        if href.startswith("#"):
            assert page.locator(href).count() == 1, href
        else:
            assert href.startswith("/"), href
    assert any(w in text.lower() for w in ("choose another", "choose it again")), text
    chooser = in_view(page, page.locator(field))
    assert chooser["inside"], f"{name}: the form to choose another file is not in the first view: {chooser}"


@pytest.mark.parametrize("script", [True, False], ids=["script", "no-script"])
@pytest.mark.parametrize("size", SIZES)
def test_every_refusal_lands_on_its_message(make_context, problems, base_url, files, size, script):
    # the refusals themselves are the point: their 4xx answers are expected in the console
    problems.allowed += ["status of 422", "status of 400"]
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}, java_script_enabled=script).new_page()
    mode = "script" if script else "no-script"

    message = refuse(page, "#upload-file", files["hello.json"])
    check(page, message, "hello.json", ["format", "Field required"], "#upload-file", f"record-{size}-{mode}")
    assert page.title().startswith("hello.json")

    for archive in ("no-run.zip", "no-run.tar.gz"):
        message = refuse(page, "#run-upload-file", files[archive])
        check(page, message, archive, [NOT_A_RUN], "#run-upload-file", f"run-{archive}-{size}-{mode}")
