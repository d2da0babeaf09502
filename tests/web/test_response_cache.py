"""The whole-response cache replays exactly what the app would send, and stays bounded."""
import pytest
from fastapi.testclient import TestClient

from app.house import create_app
from app.web.middleware.response_cache import ResponseCacheMiddleware
from app.web.settings import Settings


@pytest.fixture()
def client(make_client):
    return make_client(follow_redirects=False)


def cache_of(client) -> ResponseCacheMiddleware:
    stack = client.app.build_middleware_stack()
    layer = stack
    while not isinstance(layer, ResponseCacheMiddleware):
        layer = layer.app
    return layer


def count_what_passes_the_cache(app) -> list[str]:
    """The paths of the requests that get past the app's response cache (misses), from now on."""
    layer = app.middleware_stack
    while not isinstance(layer, ResponseCacheMiddleware):
        layer = layer.app
    calls: list[str] = []
    inner = layer.app

    async def counting(scope, receive, send):
        calls.append(scope["path"])
        await inner(scope, receive, send)
    layer.app = counting
    return calls


def test_a_hit_equals_the_miss_byte_for_byte():
    app = create_app(Settings(device="cpu"))
    calls = []
    cache = ResponseCacheMiddleware(app)

    async def inner(scope, receive, send):
        calls.append(scope["path"])
        await app(scope, receive, send)
    cache.app = inner
    client = TestClient(cache)
    for url, headers in (("/api/walkthroughs/toy_grpo/step?step=clip", {}),
                         ("/walkthroughs/toy_grpo/steps/clip", {}),
                         ("/walkthroughs/toy_grpo/steps/clip", {"HX-Request": "true"})):
        first, second = client.get(url, headers=headers), client.get(url, headers=headers)
        assert first.content == second.content and first.headers == second.headers
    assert len(calls) == 3  # the second of each pair never reached the app
    page, fragment = client.get("/walkthroughs/toy_grpo/steps/clip"), client.get(
        "/walkthroughs/toy_grpo/steps/clip", headers={"HX-Request": "true"})
    assert page.content != fragment.content  # keyed on HX-Request
    plain = client.get("/walkthroughs/toy_grpo/steps/clip", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers  # keyed on Accept-Encoding


def test_errors_redirects_and_posts_are_not_cached():
    app = create_app(Settings(device="cpu"))
    cache = ResponseCacheMiddleware(app)
    client = TestClient(cache, follow_redirects=False)
    assert client.get("/walkthroughs/toy_grpo/steps/nope").status_code == 404
    assert client.get("/walkthroughs/toy_grpo/steps/clip?seed=10").status_code == 303
    assert client.get("/api/walkthroughs/toy_grpo/step?beta=-1").status_code == 422
    assert client.get("/healthz").status_code == 200  # not a cached path
    assert cache.stats()["entries"] == 0


def test_bounded_by_entries_and_bytes():
    app = create_app(Settings(device="cpu"))
    cache = ResponseCacheMiddleware(app, max_entries=3, max_bytes=10**9)
    client = TestClient(cache)
    for seed in range(6):
        client.get(f"/api/walkthroughs/toy_grpo/step?seed={seed}")
    assert cache.stats()["entries"] == 3
    small = ResponseCacheMiddleware(app, max_entries=100, max_bytes=20_000)
    client = TestClient(small)
    for seed in range(6):
        client.get(f"/api/walkthroughs/toy_grpo/step?seed={seed}")
    assert 0 < small.stats()["bytes"] <= 20_000


def test_security_headers_appear_once_on_hits(client):
    for _ in range(2):
        r = client.get("/walkthroughs/toy_grpo/steps/clip")
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers.get_list("content-security-policy").__len__() == 1


def test_a_revalidation_is_a_304_from_the_cache():
    """With the HTTP cache layer outside: If-None-Match is taken off, the 200 is replayed
    from here and answered 304 from its hash, without reaching the app."""
    app = create_app(Settings(device="cpu"))
    app.middleware_stack = app.build_middleware_stack()
    calls = count_what_passes_the_cache(app)
    client = TestClient(app)
    url = "/walkthroughs/toy_grpo/steps/clip"
    first = client.get(url)
    again = client.get(url, headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.headers["etag"] == first.headers["etag"]
    assert client.head(url, headers={"If-None-Match": first.headers["etag"]}).status_code == 304
    assert client.get(url, headers={"If-None-Match": '"other"'}).content == first.content
    assert calls == [url]


def test_an_upload_is_replayed_while_it_exists_and_not_after_its_deletion(make_client, tmp_path):
    """Uploads are never evicted, so their answers are replayed like any other; an operator's
    delete (from any process) is seen at once: a gone upload's path skips the cache."""
    from paths import SEED_PATH

    client = make_client(uploads_dir=tmp_path, follow_redirects=False)
    made = client.post("/api/walkthroughs", files={"file": ("seed.json", SEED_PATH.read_bytes())})
    assert made.status_code in (200, 201), made.text
    ident, url = made.json()["id"], made.json()["url"]
    calls = count_what_passes_the_cache(client.app)
    first, second = client.get(url), client.get(url)
    assert first.status_code == second.status_code == 200 and first.content == second.content
    assert calls == [url]                                   # the second was a replay
    assert client.app.state.catalog.uploads.delete(ident)
    assert client.get(url).status_code == 404               # not the replayed 200
    assert client.get(f"/api/walkthroughs/{ident}").status_code == 404
