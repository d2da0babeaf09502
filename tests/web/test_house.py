"""The house: a kind is one folder plus one registry line (app/house.py), and the shared layers name
no kind (docs/design.md, "How to add a kind").

- the shared layers and templates are grepped for every kind's id and name, and hold none;
- a throwaway kind, written whole into a folder by the test (a reader of its own format with a limit
  above a snapshot's, a template, a static file and stylesheet, a CLI subcommand, an upload blurb, a
  featured walkthrough, start-up state from its `install` and a route of its own in `routers`), is served
  by an app made with it, touching no file of the project (tests/web/test_add_a_kind.py walks the doc's
  steps with another);
- importing the registry changes nothing global.
"""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.house import KINDS, registry

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ["app/web", "app/views", "app/engine", "app/domain", "app/stores", "app/export", "templates", "static/css",
          "static/js"]
ENTRY_POINTS = {"app/export/__main__.py"}  # asks the house for the kinds' export targets, by no name
# Model data that shares a word with a kind's id: llama.cpp's pre-tokenizer names (GGUF `tokenizer.ggml.pre`),
# allowed only as the quoted value in the LM stack's tokenizer table
MODEL_DATA = {"app/engine/lm/text.py": re.compile(r'"smollm"')}


def kind_words() -> re.Pattern[str]:
    """Every kind's id and name, as they are written in code, prose and CSS: its id with _, - or a
    space between the words, and each word of its featured walkthroughs' ids."""
    words: set[str] = set()
    for kind in KINDS:
        parts = kind.id.split("_")
        words.add(r"[ _-]?".join(map(re.escape, parts)))
        for featured in kind.featured:
            words.add(re.escape(featured.walkthrough_id))
    return re.compile("|".join(sorted(words, key=len, reverse=True)), re.IGNORECASE)


def test_the_pattern_finds_each_kind_as_it_is_written():
    found = kind_words()
    for text in ("the toy's", "ToyGRPO", "tiny_lm", "tiny-LM", "the tiny LM", "step_record", "a step record",
                 "step-record", "tiny_lm_grpo"):
        assert found.search(text), text


def test_the_shared_layers_and_templates_name_no_kind():
    found = kind_words()
    hits = []
    for folder in SHARED:
        for path in sorted((ROOT / folder).rglob("*")):
            rel = path.relative_to(ROOT).as_posix()
            if not path.is_file() or path.suffix not in {".py", ".html", ".css", ".js"} or rel in ENTRY_POINTS:
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if (m := found.search(MODEL_DATA[rel].sub("", line) if rel in MODEL_DATA else line)) is not None:
                    hits.append(f"{rel}:{n}: {m.group(0)!r} in {line.strip()[:90]}")
    assert not hits, "a shared file names a kind:\n" + "\n".join(hits)


def test_importing_the_registry_changes_nothing_global():
    code = textwrap.dedent("""
        from app.views import meaning
        from app.web import rendering
        import app.house
        # an app's words for nodes, templates and static files are its context's (app/web/context.py):
        # nothing is bound or kept per process, by importing the kinds or otherwise
        assert meaning._DESCRIBERS.get() == (), meaning._DESCRIBERS.get()
        assert not hasattr(rendering, "templates") and not hasattr(rendering, "_STATIC_ROOTS")
        print("unchanged")
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "unchanged", out.stderr


# -- a throwaway kind, one folder written by the test ------------------------------------------

KIND_CODE = '''
"""A kind from a test: opens {"format": "throwaway", "graph": <snapshot>, "note": ...} files."""
import json
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import PlainTextResponse

from app.domain.catalog import Featured, Reader
from app.domain.snapshot import parse_snapshot
from app.domain.uploads import MB
from app.web.kind import Kind

HERE = Path(__file__).resolve().parent


def opens(data):
    return isinstance(data, dict) and data.get("format") == "throwaway"


def open_file(data, source):
    return parse_snapshot(json.dumps(data["graph"]).encode(), source=source), data.get("note")


def step_page(asked):
    return PlainTextResponse(f"throwaway: {asked.walkthrough_id}/{asked.step_id}: {asked.entry.payload}")


def install(app: FastAPI):
    app.state.throwaway_greeting = "throwaway"  # start-up state; its routes come only through `routers`


router = APIRouter()


@router.get("/api/throwaway")
def ping(request: Request):
    return {"kind": request.app.state.throwaway_greeting}


def hello(argv, cli):
    print("hello from the throwaway kind:", " ".join(argv), "|", ", ".join(k.id for k in cli.kinds.kinds))
    return 7


KIND = Kind(id="throwaway", title="A kind from a test", matches=lambda snapshot: False, step_page=step_page,
            install=install, templates=HERE / "templates", static=HERE / "static", stylesheets=("throwaway.css",),
            reader=Reader(kind="throwaway", title="throwaway file", max_bytes=4 * MB, opens=opens, open=open_file),
            featured=(Featured("mine", "A throwaway walkthrough", "What a test's kind teaches.", rank=0),),
            upload_help="throwaway/upload_help.html", commands={"hello": hello}, routers=(router,))
'''


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    """The kind's folder, importable as `throwaway_kind`, and a walkthroughs folder holding one of its files."""
    folder = tmp_path / "throwaway_kind"
    (folder / "templates" / "throwaway").mkdir(parents=True)
    (folder / "static").mkdir()
    (folder / "__init__.py").write_text(KIND_CODE)
    (folder / "templates" / "throwaway" / "upload_help.html").write_text(
        '<section id="throwaway-help">A throwaway file: {"format": "throwaway", ...}</section>\n')
    (folder / "static" / "throwaway.css").write_text(".throwaway { color: teal; }\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seed = json.loads((ROOT / "walkthroughs" / "toy_grpo.tensorviz.json").read_text())
    walkthroughs = tmp_path / "walkthroughs"
    walkthroughs.mkdir()
    (walkthroughs / "mine.json").write_text(json.dumps({"format": "throwaway", "graph": seed, "note": "from disk"}))
    import importlib

    module = importlib.import_module("throwaway_kind")
    yield module.KIND, walkthroughs, seed
    sys.modules.pop("throwaway_kind", None)


def test_a_throwaway_kind_in_its_own_folder_is_served_whole(throwaway, tmp_path):
    from app.house import create_app
    from app.web.settings import Settings

    kind, walkthroughs, seed = throwaway
    app = create_app(Settings(device="cpu", walkthroughs_dir=walkthroughs, uploads_dir=tmp_path / "uploads"),
                     kinds=(kind,))
    client = TestClient(app)
    # its reader opened the folder's file; its featured walkthrough is the default one
    assert app.state.catalog.get("mine").kind == "throwaway" and app.state.catalog.default_id == "mine"
    assert client.get("/walkthroughs/mine/steps/clip").text == "throwaway: mine/clip: from disk"
    assert client.get("/api/throwaway").json() == {"kind": "throwaway"}
    # its static file, versioned, and its stylesheet on every page
    listing = BeautifulSoup(client.get("/walkthroughs").text, "html.parser")
    sheet = next(link["href"] for link in listing.select("link[rel=stylesheet]") if "throwaway" in link["href"])
    assert sheet.startswith("/static/throwaway/throwaway.css?v=")
    css = client.get(sheet)
    assert css.status_code == 200 and "teal" in css.text
    assert listing.select_one(".walkthrough-list, main").get_text().count("A throwaway walkthrough") >= 1
    # its upload blurb
    upload = BeautifulSoup(client.get("/walkthroughs/new").text, "html.parser")
    assert upload.select_one("#throwaway-help") is not None
    # an upload of its format, larger than a snapshot may be: the transport's cap is its reader's
    big = json.dumps({"format": "throwaway", "graph": seed, "note": "x" * (3 * 1024 * 1024)}).encode()
    answer = client.post("/api/walkthroughs", files={"file": ("big.json", big, "application/json")})
    assert answer.status_code == 201, answer.text
    assert app.state.catalog.get(answer.json()["id"]).kind == "throwaway"
    too_big = client.post("/api/walkthroughs", files={"file": ("huge.json", b" " * (5 * 1024 * 1024), "application/json")})
    assert too_big.status_code == 413 and "throwaway file" in too_big.json()["error"]


def test_a_throwaway_kinds_command_runs_from_the_command_line(throwaway, capsys):
    from app.__main__ import run_command

    kind, _, _ = throwaway
    assert run_command("hello", ["a", "b"], registry((kind, *KINDS))) == 7
    assert capsys.readouterr().out.strip() == "hello from the throwaway kind: a b | throwaway, step_record, tiny_lm, smollm, toy, run_explorer"
    assert run_command("nope", [], registry((kind,))) == 2
    assert "commands: hello" in capsys.readouterr().err


def test_the_registry_refuses_two_kinds_with_one_command(throwaway):
    kind, _, _ = throwaway
    with pytest.raises(ValueError, match="command"):
        registry((kind, kind.__class__(**{**kind.__dict__, "id": "other"})))
