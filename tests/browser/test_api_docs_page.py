"""/docs in Chromium with every other host cut off: Swagger UI, vendored under /static, renders
the whole API under the app's CSP, with no console error (the conftest's watch)."""
from __future__ import annotations

import json
import urllib.request
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Route, expect

pytestmark = pytest.mark.browser


def test_docs_render_every_operation_offline(context, page, base_url):
    own = urlsplit(base_url).netloc
    outside: list[str] = []

    def only_this_server(route: Route) -> None:
        if urlsplit(route.request.url).netloc == own:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_this_server)
    with urllib.request.urlopen(base_url + "/openapi.json", timeout=10) as r:
        document = json.load(r)
    operations = sum(len(ops) for ops in document["paths"].values())
    api_paths = [p for p in document["paths"] if p.startswith("/api")]

    page.goto("/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text(document["info"]["title"])
    blocks = page.locator(".opblock")
    expect(blocks.first).to_be_visible()
    assert blocks.count() >= operations >= len(api_paths)
    expect(page.get_by_text("/api/walkthroughs", exact=True).first).to_be_visible()
    shown = page.locator(".opblock-summary-path").evaluate_all("els => els.map(e => e.dataset.path)")
    assert set(api_paths) <= set(shown), shown

    # an operation opens and shows its parameters and documented responses
    page.locator(".opblock-summary", has_text="{walkthrough_id}/step").first.click()
    expect(page.locator(".opblock.is-open .parameters").first).to_contain_text("clip_epsilon")
    expect(page.locator(".opblock.is-open .responses-table").first).to_contain_text("422")
    assert outside == [], outside
