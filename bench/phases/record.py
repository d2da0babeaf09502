"""A recorded GRPO step at the issue's scale (issue 23): G 16 × 4,096 tokens (65,536 in all), as
tests/record_factory.py builds it (`make_record(groups=1, size=16, lengths=(4096, 4096))`).

Against its own app process (`python -m app`, the same command as every phase) over a fresh,
temporary DATA_DIR, removed afterwards: the uploads land in no one's store, and every cache starts
empty.

- The file: bytes of the same record as JSON written the TRL recorder's way (`separators=(",", ":")`),
  in the compact form with float64 arrays (`packed=True`, what is uploaded), with float32 arrays
  (what app/kinds/step_record/recorders/trl_record.py writes) and as plain lists.
- Upload: `POST /api/walkthroughs` (multipart `file`), request sent → answer read, one new record
  per step (seeds never uploaded to this store), median; and one upload of the list form.
- Open time of each step page, in headless Chromium at 1280×720, a fresh context (empty HTTP
  cache) per load: navigation start → the first animation frame in which the step's focus figure
  (`[data-step-focus]`) has a visible box, or first-contentful-paint if later (the first view).
  Cold: the first request of that record after its upload, so it pays reading the record in a
  compute worker, the recompute and the render (each step on its own record); warm: the same URL
  again (`args.record_loads` loads, median), served from the caches. Next to it, when the HTML's
  last byte was in (Navigation Timing responseEnd): the server's share.
- Page weight: the step's HTML, once with `Accept-Encoding: gzip` and once `identity`.
"""
from __future__ import annotations

import base64
import copy
import gzip
import http.client
import importlib.util
import json
import shutil
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from bench.common import HOST, ROOT, get, log, median, server
from bench.phases.browser import CHROMIUM_ARGS, visible_watch

STEPS = ("group", "ratio", "kl", "loss", "diagnostics")
GROUP_SIZE, TOKENS = 16, 4096  # the scale case
SMOKE_TOKENS = 512  # --smoke checks the machinery on a smaller record
FLOAT_ARRAYS = ("logprobs", "old_logprobs", "ref_logprobs", "sampling_logprobs", "entropy")
VIEWPORT = {"width": 1280, "height": 720}

# Installed before the page's scripts (as browser.py's GRAPH_WATCH): the first frame in which the
# focus figure has a visible box, and first-contentful-paint.
FOCUS_WATCH = visible_watch("[data-step-focus]", "focusVisible")
TIMING = """() => { const n = performance.getEntriesByType('navigation')[0];
  return {ttfb: n.responseStart, html: n.responseEnd, dcl: n.domContentLoadedEventEnd,
          focusVisible: window.__bench.focusVisible, fcp: window.__bench.fcp ?? null,
          htmlBytes: n.encodedBodySize}; }"""


def _make_record():
    """tests/record_factory.py's make_record, loaded by its path (the bench imports no test package)."""
    spec = importlib.util.spec_from_file_location("bench_step_records", ROOT / "tests" / "record_factory.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_record


def _as_float32(record: dict) -> dict:
    """The compact record with its float64 arrays repacked as float32, as the TRL recorder writes them."""
    from app.kinds.step_record.domain.arrays import pack

    out = copy.deepcopy(record)
    for group in out["groups"]:
        for c in group["completions"]:
            for name in FLOAT_ARRAYS:
                v = c.get(name)
                if isinstance(v, dict):
                    c[name] = pack(np.frombuffer(base64.b64decode(v["base64"]), "<f8"), "float32")
    return out


def _file(record: dict) -> bytes:
    return json.dumps(record, separators=(",", ":"), allow_nan=False).encode()


def upload(port: int, body: bytes, name: str = "step.grpo-step.json") -> tuple[int, dict, float]:
    """POST /api/walkthroughs with `body` as the multipart `file`: (status, answer, seconds)."""
    boundary = uuid.uuid4().hex
    data = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
            "Content-Type: application/json\r\n\r\n").encode() + body + f"\r\n--{boundary}--\r\n".encode()
    conn = http.client.HTTPConnection(HOST, port, timeout=120)
    try:
        t0 = time.perf_counter()
        conn.request("POST", "/api/walkthroughs", body=data,
                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        r = conn.getresponse()
        answer = r.read()
        took = time.perf_counter() - t0
    finally:
        conn.close()
    return r.status, json.loads(answer), took


def _load(browser, url: str) -> dict:
    ctx = browser.new_context(viewport=VIEWPORT)  # an empty HTTP cache: a first visit
    ctx.add_init_script(FOCUS_WATCH)
    try:
        page = ctx.new_page()
        response = page.goto(url, wait_until="load", timeout=120_000)
        page.wait_for_function("() => window.__bench && window.__bench.focusVisible !== undefined", timeout=30_000)
        t = page.evaluate(TIMING)
        t["status"] = response.status if response else None
        t["first_view"] = max(t["focusVisible"], t["fcp"] or 0)
        return t
    finally:
        ctx.close()


def record_phase(args, figures: dict, details: dict, log_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    make_record = _make_record()
    tokens = SMOKE_TOKENS if args.smoke else TOKENS
    base_seed = 20_000_000 + int(time.time()) % 1_000_000  # one new record per step (a fresh store anyway)

    def build(seed: int, packed: bool) -> dict:
        return make_record(seed=seed, groups=1, size=GROUP_SIZE, lengths=(tokens, tokens), packed=packed)

    compact = build(base_seed, True)
    sizes = {"compact_f64": len(_file(compact)), "compact_f32": len(_file(_as_float32(compact))),
             "list": len(_file(build(base_seed, False)))}
    figures.update(record_group_size=GROUP_SIZE, record_completion_tokens=tokens, record_tokens=GROUP_SIZE * tokens,
                   record_file_compact_bytes=sizes["compact_f64"], record_file_compact_f32_bytes=sizes["compact_f32"],
                   record_file_list_bytes=sizes["list"])
    bodies = {step: _file(build(base_seed + k, True)) for k, step in enumerate(STEPS)}
    list_body = _file(build(base_seed + len(STEPS), False))
    data = Path(tempfile.mkdtemp(prefix="bench-record-"))
    pages, uploads = [], []
    with server(args.python, args.device, args.log_level, log_path, env={"DATA_DIR": str(data / "store")}) as \
            (port, _proc), sync_playwright() as pw:
        base = f"http://{HOST}:{port}"
        browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            _warm_up(port, base_seed)
            _load_warmup(browser, base)
            for step in STEPS:
                status, answer, took = upload(port, bodies[step])
                uploads.append({"step": step, "status": status, "seconds": took, "bytes": len(bodies[step]),
                                "id": answer.get("id")})
                path = f"/walkthroughs/{answer['id']}/steps/{step}"
                cold = _load(browser, base + path)
                warm = [_load(browser, base + path) for _ in range(args.record_loads)]
                s_gz, h_gz, gz = get(port, path, {"Accept-Encoding": "gzip"}, timeout=120)
                s_raw, _h, raw = get(port, path, {"Accept-Encoding": "identity"}, timeout=120)
                pages.append({"step": step, "path": path, "cold": cold, "warm": warm,
                              "status": [cold["status"], *(w["status"] for w in warm), s_gz, s_raw],
                              "gzip_encoding": h_gz.get("content-encoding", "identity"),
                              "raw_bytes": len(raw), "gzip_bytes": len(gz),
                              "gzip_decoded_bytes": len(gzip.decompress(gz)) if h_gz.get("content-encoding") == "gzip"
                              else len(gz)})
                figures[f"record_open_{step}_cold_ms"] = cold["first_view"]
                figures[f"record_open_{step}_warm_ms"] = median([w["first_view"] for w in warm])
                figures[f"record_html_{step}_cold_ms"] = cold["html"]  # the HTML's last byte in
                figures[f"record_html_{step}_warm_ms"] = median([w["html"] for w in warm])
                figures[f"record_page_{step}_bytes"] = len(raw)
                figures[f"record_page_{step}_gzip_bytes"] = len(gz)
                log(f"record {step}: upload {took:.2f} s, first view cold {cold['first_view']:.0f} ms "
                    f"(HTML in at {cold['html']:.0f} ms), warm {figures[f'record_open_{step}_warm_ms']:.0f} ms; "
                    f"HTML {len(raw)} B, gzip {len(gz)} B")
            status, _answer, took = upload(port, list_body, "step-lists.grpo-step.json")
            uploads.append({"step": None, "form": "list", "status": status, "seconds": took, "bytes": len(list_body)})
            figures["record_upload_list_s"] = took
        finally:
            browser.close()
    shutil.rmtree(data, ignore_errors=True)
    figures["record_upload_s"] = median([u["seconds"] for u in uploads if u["step"]])
    details["record"] = {"seed": base_seed, "group_size": GROUP_SIZE, "tokens_per_completion": tokens,
                         "file_bytes": sizes, "viewport": VIEWPORT, "warm_loads": args.record_loads,
                         "uploads": uploads, "pages": pages}
    bad = [p["path"] for p in pages if set(p["status"]) != {200} or p["gzip_encoding"] != "gzip"]
    bad += [f"upload {u['step'] or 'lists'}: {u['status']}" for u in uploads if u["status"] != 201]
    if bad:
        details.setdefault("problems", []).append(f"step record pages or uploads not as expected: {bad}")


def _warm_up(port: int, seed: int) -> None:
    """The app answers /healthz before its compute workers have started (they start in the
    background, ~2 s each with torch): uncached toy steps, as many at once as there are workers,
    until each has answered, so a record's cold figure holds the record's own cost, not a start-up."""
    from app.web.settings import Settings

    slots = Settings().compute_slots
    t0 = time.perf_counter()
    with ThreadPoolExecutor(slots) as pool:
        for rnd in range(2):
            paths = [f"/api/walkthroughs/toy_grpo/step?step=clip&seed={seed + rnd * slots + i}"
                     for i in range(slots)]
            statuses = list(pool.map(lambda p: get(port, p, timeout=120)[0], paths))
            if set(statuses) != {200}:
                raise RuntimeError(f"warm-up of the compute workers: {statuses}")
    log(f"record: {slots} compute workers warm in {time.perf_counter() - t0:.1f} s")


def _load_warmup(browser, base: str) -> None:
    """The first context pays the browser's own start-up: one load of `/` first, not counted."""
    ctx = browser.new_context(viewport=VIEWPORT)
    try:
        ctx.new_page().goto(base + "/", wait_until="load")
    finally:
        ctx.close()
