"""/docs (Swagger UI vendored, under the app's one CSP), strict API query strings, and HEAD.

- /docs is our page: every asset it names is same-origin and served; no inline script; the
  CSP on it is the one every response gets, with no outside host. ReDoc is gone (404).
- An /api route refuses a query parameter it does not declare (422 naming it and listing the
  known ones, derived from the route's parameters) instead of running with the default.
- HEAD answers wherever GET does: the GET's status and headers, an empty body; a 405 names
  every method of its path, HEAD included.
"""
from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup
from csp import csp_directives
from paths import ROOT
from record_factory import make_record

from app.web.schemas.errors import ValidationErrorBody

TENSORS = "/api/walkthroughs/toy_grpo/step"
SWAGGER = sorted((ROOT / "static" / "vendor").glob("swagger-ui-*"))


@pytest.fixture(scope="module")
def client(make_client):
    return make_client(follow_redirects=False)


@pytest.fixture(scope="module")
def openapi(client) -> dict:
    return client.get("/openapi.json").json()




# -- /docs ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def docs(client):
    response = client.get("/docs")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    return response


def asset_urls(html: str) -> list[str]:
    soup = BeautifulSoup(html, "html.parser")
    return [tag.get("src") or tag.get("href") for tag in soup.find_all(["script", "link", "img", "a"])
            if tag.get("src") or tag.get("href")]


def test_docs_names_only_same_origin_assets(docs):
    assert not re.search(r"(?i)\b(https?:)?//[a-z0-9]", docs.text), "an absolute URL on /docs"
    urls = asset_urls(docs.text)
    assert len(urls) >= 4  # icon, swagger-ui.css, swagger-ui-bundle.js, swagger-init.js (+ the noscript link)
    for url in urls:
        parts = urlsplit(url)
        assert not parts.scheme and not parts.netloc and url.startswith("/"), url


def test_docs_assets_are_served(client, docs):
    soup = BeautifulSoup(docs.text, "html.parser")
    scripts = [s["src"] for s in soup.find_all("script")]
    styles = [link["href"] for link in soup.find_all("link", rel="stylesheet")]
    assert any("/swagger-ui-bundle.js" in s for s in scripts) and any(s.startswith("/static/js/swagger-init.js")
                                                                     for s in scripts)
    assert any("/swagger-ui.css" in s for s in styles)
    for url in asset_urls(docs.text):
        response = client.get(url)
        assert response.status_code == 200, url
    # the bootstrap reads the document's URL from the page, and the document is there
    target = soup.find(id="swagger-ui")["data-openapi-url"]
    assert target == "/openapi.json" and client.get(target).json()["openapi"].startswith("3.")


def test_docs_has_no_inline_script_or_style(docs):
    soup = BeautifulSoup(docs.text, "html.parser")
    for script in soup.find_all("script"):
        assert script.get("src") and not script.get_text(strip=True), script
    assert not soup.find_all("style") and not soup.select("[style]")
    assert not [a for tag in soup.find_all(True) for a in tag.attrs if a.lower().startswith("on")]


def test_docs_csp_is_the_apps_one_with_no_outside_host(client, docs):
    csp = docs.headers["content-security-policy"]
    assert csp == client.get("/healthz").headers["content-security-policy"]
    assert csp == client.get("/static/favicon.svg").headers["content-security-policy"]
    for directive, sources in csp_directives(csp).items():
        for source in sources:
            assert source in ("'self'", "'none'", "data:"), (directive, source)
    assert "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp


def test_swagger_ui_is_vendored_with_its_licence(docs):
    assert len(SWAGGER) == 1, SWAGGER  # one version, named in its folder
    folder = SWAGGER[0]
    version = folder.name.removeprefix("swagger-ui-")
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert "Apache License" in (folder / "LICENSE").read_text() and "Version 2.0" in (folder / "LICENSE").read_text()
    assert f'PACKAGE_VERSION:"{version}"' in (folder / "swagger-ui-bundle.js").read_text()
    assert f"/static/vendor/{folder.name}/swagger-ui-bundle.js" in docs.text
    assert f"swagger-ui-dist {version}" in (ROOT / "README.md").read_text()
    # the bundle, its stylesheet and their notices; no source maps or other builds
    assert {p.name for p in folder.iterdir()} <= {"swagger-ui-bundle.js", "swagger-ui.css", "LICENSE", "NOTICE",
                                                  "swagger-ui-bundle.js.LICENSE.txt"}


def test_redoc_is_gone_and_nothing_links_to_it(client):
    assert client.get("/redoc").status_code == 404
    texts = [p.read_text() for p in (ROOT / "templates").rglob("*.html")] + [(ROOT / "README.md").read_text()]
    assert not [t for t in texts if "/redoc" in t]


# -- strict query strings ---------------------------------------------------------------

def refusal(response, param: str) -> ValidationErrorBody:
    assert response.status_code == 422, response.text[:300]
    body = ValidationErrorBody.model_validate(response.json())
    assert [d.param for d in body.detail] == [param]
    assert body.detail[0].message.startswith(f"Unknown query parameter '{param}'; known: ")
    assert body.error.startswith(f"{param}: ")
    assert body.detail[0].allowed is None  # no range: it is no parameter of this route
    return body


@pytest.mark.parametrize("url, param", [
    (TENSORS + "?clip_eps=0.9", "clip_eps"),
    (TENSORS + "?step=clip&Seed=3", "Seed"),
    ("/api/walkthroughs?page=2", "page"),
    ("/api/walkthroughs/toy_grpo?step=clip", "step"),
    ("/api/processes?seed=1", "seed"),
    ("/api/processes/r1?stage=cold-start", "stage"),
    ("/api/processes/compare?iterations=2", "iterations"),
])
def test_unknown_query_parameter_is_refused(client, url, param):
    refusal(client.get(url), param)


def test_a_typo_never_runs_with_the_default(client):
    body = refusal(client.get(TENSORS + "?clip_eps=0.9"), "clip_eps")
    assert "clip_epsilon" in body.detail[0].message
    assert client.get(TENSORS + "?clip_epsilon=0.9&node=ratio").json()["params"]["clip_epsilon"] == 0.9


def test_every_unknown_parameter_is_named(client):
    body = ValidationErrorBody.model_validate(client.get(TENSORS + "?a=1&seed=2&b=3&a=4").json())
    assert [d.param for d in body.detail] == ["a", "b"]


def test_upload_refuses_unknown_query_parameters(client):
    files = {"file": ("x.json", b"{}", "application/json")}
    refusal(client.post("/api/walkthroughs?overwrite=1", files=files), "overwrite")


@pytest.mark.parametrize("url, param, allowed", [
    (TENSORS + "?clip_epsilon=2", "clip_epsilon", "0 < clip_epsilon < 1"),
    (TENSORS + "?group_size=1", "group_size", "2 <= group_size <= 4096"),
    ("/api/processes/r1?seed=-1", "seed", None),
    ("/api/processes/compare?iterations_scale=x", "iterations_scale", None),
])
def test_a_known_parameter_with_a_bad_value_keeps_its_422(client, url, param, allowed):
    response = client.get(url)
    assert response.status_code == 422
    body = ValidationErrorBody.model_validate(response.json())
    assert body.detail[0].param == param and "Unknown query parameter" not in body.error
    if allowed:
        assert body.detail[0].allowed == allowed


def test_pages_still_ignore_unknown_parameters(client):
    # a page canonicalises its URL instead (303 without the junk), as before
    assert client.get("/walkthroughs/toy_grpo/steps/clip?junk=1").status_code == 303


URLS = {  # every /api operation of the document, as a URL that reaches its handler
    "/api/walkthroughs": "/api/walkthroughs",
    "/api/walkthroughs/{walkthrough_id}": "/api/walkthroughs/toy_grpo",
    "/api/walkthroughs/{walkthrough_id}/compare": "/api/walkthroughs/toy_grpo/compare",
    "/api/processes": "/api/processes",
    "/api/processes/compare": "/api/processes/compare",
    "/api/processes/{process_id}": "/api/processes/r1",
    "/api/walkthroughs/{walkthrough_id}/paths/{path}": "/api/walkthroughs/toy_grpo/paths/r1",
}
STEP = "/api/walkthroughs/{walkthrough_id}/step"  # one operation, each kind's handler (app/web/routes/kind_routes.py)


def test_known_names_are_the_documented_parameters(client, openapi):
    """Derived from each route's parameters (its dependencies' too), so they match the document."""
    operations = {(path, method) for path, ops in openapi["paths"].items() if path.startswith("/api") for method in ops}
    posts = {("/api/walkthroughs", "post"), ("/api/walkthroughs/{walkthrough_id}/paths/{path}", "post"),
             ("/api/processes/{process_id}", "post"), ("/api/processes/compare", "post"),  # POSTs start runs
             ("/api/walkthroughs/examples/{name}", "post"),  # and open a shipped example record
             (STEP, "post"),  # the real model's step is a job: POST starts it
             ("/api/runs/examples/trl", "post"),  # and store the shipped example run
             ("/api/runs", "post")}  # or a run sent as one archive
    # a recorded step's routes need a record: one is uploaded (tests/record_factory.py)
    upload = client.post("/api/walkthroughs", files={"file": ("r.json", json.dumps(make_record()), "application/json")})
    record_id = upload.json()["id"]
    run_url = "/api" + client.post("/api/runs/examples/trl").json()["url"]
    urls = {**URLS, "/api/schemas/step-record": "/api/schemas/step-record", "/api/runs/{run_id}": run_url,
            "/api/runs/{run_id}/diff": run_url + "/diff",
            "/api/runs/compare": "/api/runs/compare"}  # the unknown parameter is refused before the runs are checked
    assert {(p, "get") for p in [*urls, STEP]} | posts == operations

    def documented(path: str) -> list[str]:
        return sorted(p["name"] for p in openapi["paths"][path]["get"].get("parameters", []) if p["in"] == "query")

    def known(url: str) -> str:
        return refusal(client.get(url + "?zz_unknown=1"), "zz_unknown").detail[0].message.split("; known: ")[1]

    for path, url in urls.items():
        assert known(url) == (", ".join(documented(path)) or "none (this route takes no query parameters)"), path
    # the one step operation documents every kind's parameters: each kind's are among them, and together all
    by_kind = [known(STEP.format(walkthrough_id=w)) for w in ("toy_grpo", "tiny_lm_grpo", "smollm_grpo", record_id)]
    assert set(documented(STEP)) == {name for names in by_kind for name in names.split(", ")}


def test_every_api_operation_documents_the_refusal(openapi):
    for path, ops in openapi["paths"].items():
        for method, op in ops.items():
            if not path.startswith("/api"):
                continue
            entry = op["responses"]["422"]
            assert "query parameter the route does not take" in entry["description"], (method, path)
            assert "ValidationErrorBody" in str(entry["content"]["application/json"]["schema"]), (method, path)


# -- HEAD and 405 -----------------------------------------------------------------------

HEAD_URLS = [
    "/healthz", "/openapi.json", "/docs",
    "/api/walkthroughs", "/api/walkthroughs/toy_grpo", TENSORS + "?step=clip", "/api/processes", "/api/processes/r1",
    "/api/walkthroughs/nope", TENSORS + "?clip_eps=0.9", "/api/processes/nope",          # 404, 422, 404
    "/static/favicon.svg", "/static/js/swagger-init.js", f"/static/vendor/{SWAGGER[0].name}/swagger-ui.css",
    "/static/nope.css",
    "/", "/walkthroughs/toy_grpo/steps/clip", "/walkthroughs/toy_grpo", "/walkthroughs/new", "/no/such/page",
]


@pytest.mark.parametrize("url", HEAD_URLS)
def test_head_answers_as_get(client, url):
    get, head = client.get(url), client.head(url)
    assert head.status_code == get.status_code, (url, get.status_code, head.status_code)
    assert head.status_code != 405
    assert head.content == b""
    assert dict(head.headers) == dict(get.headers), url  # content-length of the GET's body included


@pytest.mark.parametrize("method, url, allow", [
    ("DELETE", "/api/walkthroughs", "GET, HEAD, POST"),
    ("PUT", "/healthz", "GET, HEAD"),
    ("DELETE", "/api/processes/r1", "GET, HEAD, POST"),
    ("POST", "/docs", "GET, HEAD"),
    ("PATCH", "/openapi.json", "GET, HEAD"),
    ("DELETE", "/static/favicon.svg", "GET, HEAD"),
])
def test_405_names_every_method_of_the_path(client, method, url, allow):
    response = client.request(method, url)
    assert response.status_code == 405
    assert response.headers["allow"] == allow
