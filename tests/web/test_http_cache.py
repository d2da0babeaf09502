"""HTTP caching: ETag, Cache-Control, Vary and 304 on every deterministic GET; no-store on
errors and /healthz; one-year immutable static files under a content hash; and no Host
header in any Location (middleware/http_cache.py)."""
from __future__ import annotations

import re
from collections import deque
from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup
from runs import start_default_runs

from app.web.middleware.http_cache import none_match

STRONG = re.compile(r'^"[0-9a-f]{32}"$')
ONE_YEAR = "public, max-age=31536000, immutable"
PAGE_VARY = {"hx-request", "hx-history-restore-request"}

# Every kind of deterministic GET: pages, fragments, the upload form, JSON, the API document
# and reference, a static file without its hash.
DETERMINISTIC = [
    ("/", {}),
    ("/walkthroughs/toy_grpo/steps/clip", {}),
    ("/walkthroughs/toy_grpo/steps/clip?node=ratio", {"HX-Request": "true"}),
    ("/walkthroughs/toy_grpo/steps/clip", {"HX-Request": "true", "HX-History-Restore-Request": "true"}),
    ("/walkthroughs/new", {}),
    ("/api/walkthroughs", {}),
    ("/api/walkthroughs/toy_grpo", {}),
    ("/api/walkthroughs/toy_grpo/step?step=clip", {}),
    ("/api/processes", {}),
    ("/api/processes/r1", {}),
    ("/openapi.json", {}),
    ("/docs", {}),
    ("/static/css/app.css", {}),
]


@pytest.fixture(scope="module")
def client(make_client):
    client = make_client(follow_redirects=False, raise_server_exceptions=False)
    start_default_runs(client.app)  # as `python -m app` does at start-up: the default paths' runs
    return client


def vary(response) -> set[str]:
    return {v.strip().lower() for v in response.headers.get("vary", "").split(",") if v.strip()}


def max_age(response) -> int:
    m = re.search(r"max-age=(\d+)", response.headers.get("cache-control", ""))
    return int(m.group(1)) if m else -1


@pytest.mark.parametrize("url, headers", DETERMINISTIC)
def test_deterministic_gets_carry_an_etag_and_public_cache_control(client, url, headers):
    first = client.get(url, headers=headers)
    assert first.status_code == 200, (url, first.status_code)
    etag, cc = first.headers.get("etag"), first.headers.get("cache-control", "")
    assert etag and STRONG.match(etag), (url, etag)
    assert cc.startswith("public") and max_age(first) > 0, (url, cc)
    assert "no-store" not in cc and "private" not in cc
    again = client.get(url, headers=headers)
    assert again.headers["etag"] == etag and again.content == first.content  # same URL, same ETag

    # A matching If-None-Match: 304, no body, the same validators and caching headers.
    for condition in (etag, f"W/{etag}", f'"0000", {etag}', f'W/"x", W/{etag}', "*"):
        hit = client.get(url, headers={**headers, "If-None-Match": condition})
        assert hit.status_code == 304, (url, condition, hit.status_code)
        assert hit.content == b""
        for name in ("etag", "cache-control", "vary"):
            assert hit.headers.get(name) == first.headers.get(name), (url, name)
        assert "content-encoding" not in hit.headers and "content-type" not in hit.headers
        assert hit.headers["x-content-type-options"] == "nosniff"  # security headers too
    miss = client.get(url, headers={**headers, "If-None-Match": '"0123", W/"4567"'})
    assert miss.status_code == 200 and miss.content == first.content and miss.headers["etag"] == etag

    # HEAD is GET without the body: the same ETag and Cache-Control, and it revalidates too.
    head = client.head(url, headers=headers)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["etag"] == etag and head.headers["cache-control"] == cc
    assert client.head(url, headers={**headers, "If-None-Match": etag}).status_code == 304


def test_page_cache_control_suits_a_cdn(client):
    cc = client.get("/walkthroughs/toy_grpo/steps/clip").headers["cache-control"]
    assert cc == "public, max-age=300, stale-while-revalidate=3600, stale-if-error=86400"


def test_different_requests_get_different_etags_and_the_right_vary(client):
    page = client.get("/walkthroughs/toy_grpo/steps/clip")
    fragment = client.get("/walkthroughs/toy_grpo/steps/clip", headers={"HX-Request": "true"})
    restore = client.get("/walkthroughs/toy_grpo/steps/clip",
                         headers={"HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert page.headers["etag"] != fragment.headers["etag"]
    assert restore.headers["etag"] == page.headers["etag"]  # a history restore gets the whole page
    for r in (page, fragment, restore):
        assert PAGE_VARY <= vary(r), r.headers.get("vary")
    # the fragment's ETag does not revalidate the page
    assert client.get("/walkthroughs/toy_grpo/steps/clip",
                      headers={"If-None-Match": fragment.headers["etag"]}).status_code == 200
    one = client.get("/api/walkthroughs/toy_grpo/step?step=clip&seed=1")
    two = client.get("/api/walkthroughs/toy_grpo/step?step=clip&seed=2")
    assert one.headers["etag"] != two.headers["etag"]
    assert not PAGE_VARY & vary(one)  # JSON does not depend on the htmx headers
    assert "HX-Request" not in client.get("/api/walkthroughs").headers.get("vary", "")


def test_gzip_and_identity_bodies_have_different_etags(client):
    url = "/walkthroughs/toy_grpo/steps/clip"
    gz = client.get(url, headers={"Accept-Encoding": "gzip"})
    plain = client.get(url, headers={"Accept-Encoding": "identity"})
    assert gz.headers["content-encoding"] == "gzip" and "content-encoding" not in plain.headers
    assert gz.headers["etag"] != plain.headers["etag"]
    assert "accept-encoding" in vary(gz) and "accept-encoding" in vary(plain)
    # each revalidates only its own encoding
    assert client.get(url, headers={"Accept-Encoding": "identity", "If-None-Match": gz.headers["etag"]}).status_code == 200
    assert client.get(url, headers={"Accept-Encoding": "gzip", "If-None-Match": gz.headers["etag"]}).status_code == 304
    assert client.get(url, headers={"Accept-Encoding": "identity",
                                    "If-None-Match": plain.headers["etag"]}).status_code == 304


def test_gzip_etag_is_stable_without_the_response_cache(make_client):
    """The ETag hashes the compressed bytes: compression must be deterministic (no timestamp),
    or every replica and every second would give another ETag."""
    url = "/walkthroughs/toy_grpo/steps/clip"
    etags = {make_client(response_cache_mb=0).get(url, headers={"Accept-Encoding": "gzip"}).headers["etag"]
             for _ in range(2)}
    assert len(etags) == 1


def test_static_files_under_their_hash_are_immutable_for_a_year(client):
    static_url = client.app.state.context.static.url  # the app's versions of its static files
    url = static_url("css/app.css")
    assert re.fullmatch(r"/static/css/app\.css\?v=[0-9a-f]{10}", url)
    hashed = client.get(url)
    assert hashed.status_code == 200 and hashed.headers["cache-control"] == ONE_YEAR
    assert STRONG.match(hashed.headers["etag"])
    assert client.get(url, headers={"If-None-Match": hashed.headers["etag"]}).status_code == 304
    assert client.head(url).headers["cache-control"] == ONE_YEAR
    # linked from the pages with their hash
    page = BeautifulSoup(client.get("/walkthroughs/toy_grpo/steps/clip").text, "html.parser")
    assets = [t.get("href") or t.get("src") for t in page.select("link[rel=stylesheet], script[src]")]
    assert assets and all("?v=" in a for a in assets), assets
    for asset in assets:
        assert client.get(asset).headers["cache-control"] == ONE_YEAR, asset
    # no hash, or another hash than the file's own: a short max-age and an ETag
    for other in ("/static/css/app.css", "/static/css/app.css?v=0123456789", "/static/css/app.css?v=" +
                  static_url("js/app.js").rsplit("=", 1)[1]):
        r = client.get(other)
        assert r.headers["cache-control"] == "public, max-age=300" and "immutable" not in r.headers["cache-control"]
        assert STRONG.match(r.headers["etag"])
        assert "last-modified" not in r.headers  # the content ETag is the one validator


def test_healthz_is_never_stored(client):
    r = client.get("/healthz")
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store" and "etag" not in r.headers
    assert client.get("/healthz", headers={"If-None-Match": "*"}).status_code == 200


@pytest.mark.parametrize("method, url, status, cc", [
    ("GET", "/walkthroughs/toy_grpo/steps/nope", 404, "public, max-age=30"),
    ("GET", "/api/walkthroughs/nope", 404, "public, max-age=30"),
    ("GET", "/no/such/page", 404, "public, max-age=30"),
    ("GET", "/static/nope.css", 404, "public, max-age=30"),
    # an upload id that is not there (yet): it may be uploaded any moment
    ("GET", "/api/walkthroughs/0123456789abcdef", 404, "no-store"),
    ("GET", "/walkthroughs/0123456789abcdef/steps/clip", 404, "no-store"),
    ("GET", "/walkthroughs/toy_grpo/steps/clip?seed=x", 422, "no-store"),
    ("GET", "/api/walkthroughs/toy_grpo/step?seed=-1", 422, "no-store"),
    ("DELETE", "/api/walkthroughs", 405, "no-store"),
    ("POST", "/api/walkthroughs", 422, "no-store"),
])
def test_errors_are_not_stored_and_404s_only_briefly(client, method, url, status, cc):
    r = client.request(method, url)
    assert r.status_code == status, (url, r.status_code)
    assert r.headers["cache-control"] == cc
    assert "etag" not in r.headers
    if method == "GET":  # never a 304 for an error
        assert client.get(url, headers={"If-None-Match": "*"}).status_code == status


def test_a_503_is_never_stored(make_client, tmp_path):
    client = make_client(walkthroughs_dir=tmp_path / "nope", raise_server_exceptions=False)
    r = client.get("/")
    assert r.status_code == 503 and r.headers["cache-control"] == "no-store" and "etag" not in r.headers


def test_an_upload_is_cacheable_like_the_built_in_walkthroughs(client):
    from snapshots import SEED_PATH
    body = client.post("/api/walkthroughs", files={"file": ("mine.json", SEED_PATH.read_bytes(), "application/json")})
    assert body.status_code in (200, 201) and body.headers["cache-control"] == "no-store"
    page = client.get(body.json()["url"])
    assert page.status_code == 200 and page.headers["cache-control"].startswith("public, max-age=300")
    assert client.get(body.json()["url"], headers={"If-None-Match": page.headers["etag"]}).status_code == 304


# -- Location never names a host --------------------------------------------------------------

@pytest.mark.parametrize("url, location", [
    ("/walkthroughs/new/", "/walkthroughs/new"),
    ("/api/walkthroughs/", "/api/walkthroughs"),
    ("/api/walkthroughs/toy_grpo/step/?step=clip", "/api/walkthroughs/toy_grpo/step?step=clip"),
    ("/docs/", "/docs"),
])
def test_the_trailing_slash_redirect_is_relative(client, url, location):
    r = client.get(url, headers={"Host": "evil.example"})
    assert r.status_code == 307 and r.headers["location"] == location


@pytest.mark.parametrize("url", ["//evil.example/", "/\\evil.example/", "/static", "/nope/"])
def test_no_redirect_off_site_or_to_nothing(client, url):
    r = client.get("http://testserver" + url, headers={"Host": "evil.example"})
    assert urlsplit(str(r.request.url)).path == url
    assert r.status_code == 404 and "location" not in r.headers


def relative(location: str) -> bool:
    parts = urlsplit(location)
    return location.startswith("/") and not location.startswith("//") and not parts.scheme and not parts.netloc


def links(html: str) -> list[str]:
    soup = BeautifulSoup(html, "html.parser")
    found = [t.get(attr) for attr in ("href", "hx-get", "action", "src") for t in soup.select(f"[{attr}]")]
    return [u for u in found if u and u.startswith("/") and not u.startswith("//")]


def test_every_redirect_in_a_crawl_is_relative(client):
    """From the home page, every link (and each with a trailing slash, and the walkthrough
    URLs without a step) under a forged Host: a 3xx names a path, never a host."""
    start = ["/", "/walkthroughs/toy_grpo", "/walkthroughs/new/", "/walkthroughs/toy_grpo/steps/clip?seed=10"]
    queue, seen, redirects = deque(start), set(start), 0
    budget = 40
    while queue and budget:
        url = queue.popleft()
        budget -= 1
        for variant in (url, urlsplit(url).path.rstrip("/") + "/"):
            r = client.get(variant, headers={"Host": "evil.example"})
            if 300 <= r.status_code < 400:
                redirects += 1
                location = r.headers["location"]
                assert relative(location) and "evil.example" not in location, (variant, location)
                if location not in seen:
                    seen.add(location)
                    queue.append(location)
            if variant == url and r.headers.get("content-type", "").startswith("text/html"):
                for link in links(r.text):
                    if link not in seen and not link.startswith("/static/"):
                        seen.add(link)
                        queue.append(link)
    assert redirects >= 3


def test_none_match_follows_rfc_9110():
    etag = '"abc"'
    assert none_match('"abc"', etag) and none_match('W/"abc"', etag) and none_match("*", etag)
    assert none_match(' "x" , W/"abc" ', etag) and none_match('"abc"', 'W/"abc"')
    assert not none_match('"abcd"', etag) and not none_match('"ab", "c"', etag) and not none_match("", etag)
    assert not none_match("abc", etag)  # unquoted: not an entity tag
