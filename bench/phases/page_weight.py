"""The weight of a first load of `/`: the page and every asset it references, as transferred.

Fetched the way a client with an empty cache would (Accept-Encoding: gzip, br), one
file at a time, so the figure is the sum of the bodies on the wire; the decoded size
and the header bytes are kept next to it. The browser phase reports Chromium's own
count alongside, which also includes headers.
"""
from __future__ import annotations

import gzip
import html.parser
import re
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from bench.common import ACCEPT_ENCODING, HOST, get


class _Assets(html.parser.HTMLParser):
    """Collects what a browser would fetch on its own: stylesheets, icons, preloads, scripts, images."""

    LINK_RELS = frozenset({"stylesheet", "icon", "shortcut", "preload", "modulepreload", "manifest",
                           "apple-touch-icon"})

    def __init__(self):
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "link" and a.get("href") and set((a.get("rel") or "").lower().split()) & self.LINK_RELS:
            self.refs.append(a["href"])
        elif tag in ("script", "img") and a.get("src"):
            self.refs.append(a["src"])


def page_weight(port: int, figures: dict, details: dict) -> None:
    origin = f"http://{HOST}:{port}"
    files, seen = [], set()

    def fetch(url: str, kind: str) -> bytes | None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "") or (parts.netloc and parts.netloc != f"{HOST}:{port}"):
            return None  # data: URLs and other origins are not ours
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        if path in seen:
            return None
        seen.add(path)
        status, headers, body = get(port, path, {"Accept-Encoding": ACCEPT_ENCODING})
        decoded = body
        enc = headers.get("content-encoding", "")
        if enc == "gzip":
            decoded = gzip.decompress(body)
        elif enc == "br":
            try:
                import brotli  # optional: only to report the decoded size
                decoded = brotli.decompress(body)
            except ImportError:
                decoded = b""
        # Header bytes: "name: value\r\n" per header plus the status line ("HTTP/1.1 200 OK\r\n").
        header_bytes = sum(len(k) + len(v) + 4 for k, v in headers.items()) + 17
        files.append({"path": path, "kind": kind, "status": status, "encoding": enc or "identity",
                      "bytes": len(body), "uncompressed_bytes": len(decoded), "header_bytes": header_bytes})
        return decoded

    page = fetch(origin + "/walkthroughs/toy_grpo/steps/advantages", "html")  # the step page, not the start page
    parser = _Assets()
    parser.feed(page.decode("utf-8", "replace"))
    for ref in parser.refs:
        url = urljoin(origin + "/", ref)
        body = fetch(url, Path(urlsplit(url).path).suffix.lstrip(".") or "other")
        if body is not None and url.split("?")[0].endswith(".css"):  # fonts/images a stylesheet pulls in
            for inner in re.findall(r"url\(\s*['\"]?([^'\")]+)['\"]?\s*\)", body.decode("utf-8", "replace")):
                if not inner.startswith("data:"):
                    fetch(urljoin(url, inner), "css-asset")
    figures["first_load_bytes"] = sum(f["bytes"] for f in files)
    figures["first_load_uncompressed_bytes"] = sum(f["uncompressed_bytes"] for f in files)
    details["first_load_files"] = files
    details["first_load_header_bytes"] = sum(f["header_bytes"] for f in files)
    bad = [f["path"] for f in files if f["status"] != 200]
    if bad:
        details.setdefault("problems", []).append(f"first-load assets not 200: {bad}")
