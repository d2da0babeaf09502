"""The weight of the tiny-LM walkthrough's step pages (issue 13): GET
/walkthroughs/tiny_lm_grpo/steps/<step> for each of its seven steps, once as plain bytes
(Accept-Encoding: identity) and once gzipped (Accept-Encoding: gzip), as page_weight.py
fetches the first load. The first GET computes the step (the app's caches are cold), so its
time is kept too; the others reuse the engine's result.
"""
from __future__ import annotations

import gzip
import time

from bench.common import get

WALKTHROUGH = "tiny_lm_grpo"
STEPS = ("sample", "rewards", "advantages", "ratio", "kl", "aggregation", "update")


def tiny_lm_page_weight(port: int, figures: dict, details: dict) -> None:
    pages = []
    for step in STEPS:
        path = f"/walkthroughs/{WALKTHROUGH}/steps/{step}"
        t0 = time.perf_counter()
        status_gz, headers_gz, body_gz = get(port, path, {"Accept-Encoding": "gzip"}, timeout=120)
        ms = (time.perf_counter() - t0) * 1e3
        status_raw, headers_raw, body_raw = get(port, path, {"Accept-Encoding": "identity"}, timeout=120)
        enc = headers_gz.get("content-encoding", "identity")
        decoded = gzip.decompress(body_gz) if enc == "gzip" else body_gz
        pages.append({"step": step, "path": path, "status": [status_gz, status_raw], "gzip_encoding": enc,
                      "raw_bytes": len(body_raw), "gzip_bytes": len(body_gz), "gzip_decoded_bytes": len(decoded),
                      "first_get_ms": ms})
        figures[f"tiny_lm_page_{step}_bytes"] = len(body_raw)
        figures[f"tiny_lm_page_{step}_gzip_bytes"] = len(body_gz)
    figures["tiny_lm_page_max_gzip_bytes"] = max(p["gzip_bytes"] for p in pages)
    figures["tiny_lm_page_max_bytes"] = max(p["raw_bytes"] for p in pages)
    details["tiny_lm_pages"] = pages
    bad = [p["path"] for p in pages if p["status"] != [200, 200] or p["gzip_encoding"] != "gzip"]
    if bad:
        details.setdefault("problems", []).append(f"tiny-LM step pages not 200 + gzip: {bad}")
