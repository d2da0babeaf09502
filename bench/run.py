#!/usr/bin/env python3
"""`make bench`: the app's performance figures, side by side, from one run.

Starts the app (`python -m app`, one uvicorn worker, loopback, `--device` from
--device / BENCH_DEVICE), drives it with Debian's `wrk`, measures the engine in
this process, the first load and a step change in headless Chromium, start-up in
fresh processes, and how the engine scales. Prints ONE table (figure, value,
target, ratio, met?) and writes a JSON file (default bench/results.json).

Ratio = value / limit, so a "<=" target is met at ratio <= 1 and a ">=" target at
ratio >= 1. Targets whose limit is itself measured (e.g. 0.8 x /healthz) use the
figure measured in the same run. Nothing here asserts a timing: a missed target
is reported, not raised.

    python bench/run.py                # full run (< 3 min), writes bench/results.json
    python bench/run.py --smoke        # ~1 s per measurement: checks the machinery only
    python bench/run.py --device cuda  # same script on a GPU machine
"""
from __future__ import annotations

import argparse
import datetime as dt
import gc
import html.parser
import http.client
import importlib
import json
import math
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urljoin, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `app` importable when run as bench/run.py

HOST = "127.0.0.1"
WALKTHROUGH = "toy_grpo"
STEP = "clip"
TENSORS = f"/api/walkthroughs/{WALKTHROUGH}/tensors?step={STEP}"
STEP_PAGE = f"/walkthroughs/{WALKTHROUGH}/steps/{STEP}"
ACCEPT_ENCODING = "gzip, br"  # what a browser offers; every wrk run sends it
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
GROUP_SIZES = (8, 64, 512, 4096)
SCALES = (1, 2, 4, 8)
FIRST_LOAD_LIMIT_BYTES = 80_000  # "80 KB", read as 80 000 bytes (the stricter reading)
DCL_LIMIT_MS = 150.0
# A linear-growth limit is also the ideal, so timing noise alone would "miss" it
# half the time: growth targets are met up to ratio 1 + GROWTH_NOISE.
GROWTH_NOISE = 0.10

# Every figure the JSON must carry (tests/test_bench_smoke.py checks them all).
FIGURES = (
    "healthz_rps_before", "healthz_rps_after", "healthz_rps",
    "healthz_p50_ms", "healthz_p99_ms",
    "tensors_cached_rps", "tensors_cached_p50_ms", "tensors_cached_p99_ms",
    "tensors_uncached_rps", "tensors_uncached_p50_ms", "tensors_uncached_p99_ms",
    "step_page_rps", "step_page_p50_ms", "step_page_p99_ms",
    "fragment_rps", "fragment_p50_ms", "fragment_p99_ms",
    "healthz_c1_p50_ms_before", "healthz_c1_p50_ms_after", "healthz_c1_p50_ms",
    "tensors_uncached_c1_p50_ms", "tensors_uncached_c1_p99_ms",
    "engine_step_ms", "engine_step_cpu_ms", "web_overhead_ms",
    "first_load_bytes", "first_load_uncompressed_bytes", "first_load_browser_bytes",
    "dcl_ms", "graph_visible_ms", "step_change_ms",
    "startup_s", "import_s",
    *(f"step_ms_g{g}" for g in GROUP_SIZES),
    *(f"step_py_peak_kib_g{g}" for g in GROUP_SIZES),
    *(f"step_result_kib_g{g}" for g in GROUP_SIZES),
    *(f"step_rss_peak_delta_kib_g{g}" for g in GROUP_SIZES),
    "step_growth_g4096_over_g8", "step_growth_order",
    *(f"process_s_x{s}" for s in SCALES),
    "process_growth_x8_over_x1", "process_growth_order",
)
TARGETS = ("cached_vs_healthz", "fragment_vs_healthz", "uncached_latency", "first_load", "dcl",
           "startup", "step_growth", "process_growth")


# ---------------------------------------------------------------- helpers

def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def get(port: int, path: str, headers: dict | None = None, timeout: float = 30) -> tuple[int, dict, bytes]:
    """One GET; the body exactly as transferred (http.client does not decode gzip/br)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def machine_facts(device: str) -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch
    facts = {
        "cpu_model": cpu,
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": device,
        "platform": platform.platform(),
        "load_avg_start": list(os.getloadavg()),
    }
    if device == "cuda" and torch.cuda.is_available():
        facts["gpu"] = torch.cuda.get_device_name(0)
    try:
        facts["wrk"] = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.split("\n")[0].strip()
    except OSError:
        facts["wrk"] = None
    return facts


# ---------------------------------------------------------------- the server

@contextmanager
def server(python: str, device: str, log_level: str, log_path: Path):
    port = free_port()
    cmd = [python, "-m", "app", "--host", HOST, "--port", str(port), "--device", device,
           "--workers", "1", "--log-level", log_level]
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_healthy(proc, port, 90)
        yield port, proc
    finally:
        stop(proc)


def wait_healthy(proc: subprocess.Popen, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the app exited with {proc.returncode} during start-up (see the bench log)")
        try:
            if get(port, "/healthz", timeout=2)[0] == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"no 200 from /healthz within {timeout} s")
        time.sleep(0.005)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


# ---------------------------------------------------------------- wrk

# Every request asks for a seed never asked before, so every request misses the
# engine's cache. Seeds: base + thread index * stride + request number.
UNCACHED_LUA = """
local next_id = 0
function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end
function init(args)
  seed = tonumber(args[1]) + (id or 0) * tonumber(args[2])
end
function request()
  seed = seed + 1
  return wrk.format(nil, wrk.path .. "&seed=" .. string.format("%d", seed))
end
"""

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def parse_wrk(text: str) -> dict:
    def latency(pct: str) -> float:
        m = re.search(rf"^\s*{pct}%\s+([\d.]+)(us|ms|s|m|h)\s*$", text, re.M)
        return float(m.group(1)) * _UNITS[m.group(2)] if m else float("nan")

    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    total = re.search(r"(\d+) requests in ([\d.]+)(\w+),", text)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    return {
        "rps": float(rps.group(1)) if rps else float("nan"),
        "p50_ms": latency("50"), "p75_ms": latency("75"), "p90_ms": latency("90"), "p99_ms": latency("99"),
        "requests": int(total.group(1)) if total else 0,
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "socket_errors": sum(map(int, sock.groups())) if sock else 0,
    }


def wrk(port: int, path: str, *, duration: float, connections: int, threads: int,
        headers: dict | None = None, lua: Path | None = None, lua_args: tuple = ()) -> dict:
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration:g}s", "--latency", "--timeout", "10s",
           "-H", f"Accept-Encoding: {ACCEPT_ENCODING}"]
    for k, v in (headers or {}).items():
        cmd += ["-H", f"{k}: {v}"]
    if lua is not None:
        cmd += ["-s", str(lua)]
    cmd.append(f"http://{HOST}:{port}{path}")
    if lua_args:
        cmd += ["--", *map(str, lua_args)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60)
    if out.returncode != 0:
        raise RuntimeError(f"wrk failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}")
    result = parse_wrk(out.stdout)
    result["command"] = " ".join(cmd)
    result["load_avg_1min_after"] = os.getloadavg()[0]  # other work on the machine skews a run
    if result["requests"] == 0 or math.isnan(result["rps"]):
        raise RuntimeError(f"could not read wrk's output:\n{out.stdout}")
    return result


def http_phase(port: int, args, figures: dict, details: dict) -> None:
    d, c, t = args.duration, args.connections, args.threads
    hx = {"HX-Request": "true"}
    seed_stride = 1_000_000
    # Warm-up: templates compile, the cached parameter set gets computed once.
    for path, headers in ((f"/healthz", None), (TENSORS, None), (STEP_PAGE, None), (STEP_PAGE, hx),
                          (TENSORS + "&seed=1999999999", None)):
        for _ in range(args.warmup_requests):
            status, _h, _b = get(port, path, {"Accept-Encoding": ACCEPT_ENCODING, **(headers or {})})
            if status != 200:
                raise RuntimeError(f"GET {path} ({headers}) answered {status}, not 200")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(UNCACHED_LUA)
        lua = Path(f.name)
    try:
        runs = {}
        plan = [
            ("healthz_before", "/healthz", dict(connections=c)),
            ("healthz_c1_before", "/healthz", dict(connections=1)),
            ("tensors_cached", TENSORS, dict(connections=c)),
            ("tensors_uncached", TENSORS, dict(connections=c, lua=lua, lua_args=(10_000_000, seed_stride))),
            ("step_before", None, None),
            ("tensors_uncached_c1", TENSORS, dict(connections=1, lua=lua, lua_args=(20_000_000, seed_stride))),
            ("step_after", None, None),
            ("step_page", STEP_PAGE, dict(connections=c)),
            ("fragment", STEP_PAGE, dict(connections=c, headers=hx)),
            ("healthz_c1_after", "/healthz", dict(connections=1)),
            ("healthz_after", "/healthz", dict(connections=c)),
        ]
        for name, path, kw in plan:
            if path is None:  # the engine's in-process step time, next to the uncached latency
                args.measure_step(args.engine_runs // 3, name.replace("step_", "next to wrk, "))
                continue
            conns = kw.pop("connections")
            runs[name] = r = wrk(port, path, duration=d, connections=conns, threads=min(t, conns), **kw)
            log(f"wrk {name:22s} {r['rps']:8.1f} req/s  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms"
                + (f"  non-2xx {r['non_2xx']}" if r["non_2xx"] else ""))
    finally:
        lua.unlink(missing_ok=True)
    details["wrk"] = runs

    before, after = runs["healthz_before"], runs["healthz_after"]
    best = before if before["rps"] >= after["rps"] else after
    figures.update(healthz_rps_before=before["rps"], healthz_rps_after=after["rps"], healthz_rps=best["rps"],
                   healthz_p50_ms=best["p50_ms"], healthz_p99_ms=best["p99_ms"])
    for name in ("tensors_cached", "tensors_uncached", "step_page", "fragment"):
        r = runs[name]
        figures.update({f"{name}_rps": r["rps"], f"{name}_p50_ms": r["p50_ms"], f"{name}_p99_ms": r["p99_ms"]})
    b1, a1 = runs["healthz_c1_before"]["p50_ms"], runs["healthz_c1_after"]["p50_ms"]
    figures.update(healthz_c1_p50_ms_before=b1, healthz_c1_p50_ms_after=a1, healthz_c1_p50_ms=min(b1, a1),
                   tensors_uncached_c1_p50_ms=runs["tensors_uncached_c1"]["p50_ms"],
                   tensors_uncached_c1_p99_ms=runs["tensors_uncached_c1"]["p99_ms"])
    details["http_errors"] = {k: r["non_2xx"] + r["socket_errors"] for k, r in runs.items()
                              if r["non_2xx"] or r["socket_errors"]}


# ---------------------------------------------------------------- page weight

class _Assets(html.parser.HTMLParser):
    LINK_RELS = {"stylesheet", "icon", "shortcut", "preload", "modulepreload", "manifest", "apple-touch-icon"}

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
            import gzip
            decoded = gzip.decompress(body)
        elif enc == "br":
            try:
                import brotli  # optional: only to report the decoded size
                decoded = brotli.decompress(body)
            except ImportError:
                decoded = b""
        header_bytes = sum(len(k) + len(v) + 4 for k, v in headers.items()) + 17
        files.append({"path": path, "kind": kind, "status": status, "encoding": enc or "identity",
                      "bytes": len(body), "uncompressed_bytes": len(decoded), "header_bytes": header_bytes})
        return decoded

    page = fetch(origin + "/", "html")
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


# ---------------------------------------------------------------- Chromium

# (Predicates are functions, not expression strings: the app's CSP forbids eval.)
# Installed before the page's own scripts: the first animation frame in which
# svg#graph has a box and is visible (rAF runs just before that frame paints).
GRAPH_WATCH = """
(() => {
  const b = window.__bench = {};
  function check() {
    const el = document.querySelector('svg#graph');
    if (el) {
      const r = el.getBoundingClientRect();
      const shown = !el.checkVisibility || el.checkVisibility({visibilityProperty: true, opacityProperty: true});
      if (r.width > 0 && r.height > 0 && shown) { b.graphVisible = performance.now(); return; }
    }
    requestAnimationFrame(check);
  }
  requestAnimationFrame(check);
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) if (e.name === 'first-contentful-paint') b.fcp = e.startTime;
    }).observe({type: 'paint', buffered: true});
  } catch (e) {}
})();
"""

NAV_TIMING = """
() => {
  const n = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  return {
    dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd, ttfb: n.responseStart,
    graphVisible: window.__bench.graphVisible, fcp: window.__bench.fcp === undefined ? null : window.__bench.fcp,
    bytes: n.transferSize + res.reduce((s, r) => s + r.transferSize, 0),
    bodyBytes: n.encodedBodySize + res.reduce((s, r) => s + r.encodedBodySize, 0),
    resources: res.map(r => ({name: r.name, transferSize: r.transferSize, encodedBodySize: r.encodedBodySize,
                              decodedBodySize: r.decodedBodySize, duration: r.duration})),
  };
}
"""

# Armed before each click: click time (capture phase, before htmx sees it) and
# the first frame after the new step's view (step id + title) is in the DOM.
ARM_STEP_CHANGE = """
() => {
  const view = () => document.querySelector('.view-content');
  const s = window.__step = {before: view() && view().dataset.stepId};
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest('#next-step')) s.clicked = performance.now();
  }, {capture: true, once: true});
  const obs = new MutationObserver(() => {
    const v = view(), h = document.querySelector('#step-title');
    if (v && h && h.textContent.trim() && v.dataset.stepId !== s.before && s.inPlace === undefined) {
      s.inPlace = performance.now(); s.stepId = v.dataset.stepId; s.title = h.textContent.trim();
      obs.disconnect();
      requestAnimationFrame(() => { s.painted = performance.now(); s.done = true; });
    }
  });
  obs.observe(document.body, {childList: true, subtree: true, characterData: true, attributes: true});
}
"""


def browser_phase(port: int, args, figures: dict, details: dict) -> None:
    from playwright.sync_api import sync_playwright

    base = f"http://{HOST}:{port}"
    loads, changes = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            details["chromium"] = browser.version
            # Warm-up load: the first context pays the browser's own start-up.
            for i in range(args.page_loads + 1):
                ctx = browser.new_context(viewport={"width": 1400, "height": 1000})  # empty HTTP cache: a first load
                ctx.add_init_script(GRAPH_WATCH)
                page = ctx.new_page()
                page.goto(base + "/", wait_until="load")
                try:
                    page.wait_for_function("() => window.__bench && window.__bench.graphVisible !== undefined",
                                           timeout=15_000)
                except Exception as exc:
                    state = page.evaluate("""() => { const el = document.querySelector('svg#graph');
                        const r = el && el.getBoundingClientRect();
                        return {bench: window.__bench || null, graph: !!el, w: r && r.width, h: r && r.height,
                                visibility: document.visibilityState, ready: document.readyState}; }""")
                    raise RuntimeError(f"svg#graph never became visible on / : {state}") from exc
                timing = page.evaluate(NAV_TIMING)
                ctx.close()
                if i > 0:
                    loads.append(timing)
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = ctx.new_page()
            page.goto(base + "/", wait_until="load")
            while len(changes) < args.step_changes:
                if page.locator("#next-step").count() == 0:  # last step: start over
                    page.goto(base + "/", wait_until="load")
                page.evaluate(ARM_STEP_CHANGE)
                page.click("#next-step")
                page.wait_for_function("() => window.__step && window.__step.done === true", timeout=15_000)
                s = page.evaluate("() => window.__step")
                changes.append({"step": s["stepId"], "title": s["title"], "in_place_ms": s["inPlace"] - s["clicked"],
                                "painted_ms": s["painted"] - s["clicked"]})
            ctx.close()
        finally:
            browser.close()
    figures["dcl_ms"] = median([t["dcl"] for t in loads])
    # The frame in which the graph first has a visible box; it is on screen once that
    # frame is presented, which for a server-rendered graph is no earlier than FCP.
    figures["graph_visible_ms"] = median([max(t["graphVisible"], t["fcp"] or 0) for t in loads])
    figures["first_load_browser_bytes"] = median([t["bytes"] for t in loads])
    figures["step_change_ms"] = median([c["painted_ms"] for c in changes])
    details["page_loads"] = [{k: v for k, v in t.items() if k != "resources"} for t in loads]
    details["page_load_resources"] = loads[-1]["resources"] if loads else []
    details["step_changes"] = changes
    details["step_change_in_place_ms"] = median([c["in_place_ms"] for c in changes])
    details["fcp_ms"] = median([t["fcp"] for t in loads if t["fcp"] is not None])
    details["graph_in_layout_ms"] = median([t["graphVisible"] for t in loads])


# ---------------------------------------------------------------- start-up

def startup_phase(args, figures: dict, details: dict, log_path: Path) -> None:
    python = args.python
    subprocess.run([python, "-c", "import torch, fastapi"], check=True)  # warm the page cache once
    imports, starts = [], []
    for _ in range(args.starts):  # interleaved, so background load hits both alike
        # Process start to "imported", as start-up is process start to "serving":
        # the interpreter's exit (torch's teardown takes ~0.5 s) is in neither.
        t0 = time.perf_counter()
        child = subprocess.Popen([python, "-c", "import torch, fastapi; print('imported', flush=True)"],
                                 stdout=subprocess.PIPE, text=True)
        line = child.stdout.readline()
        imports.append(time.perf_counter() - t0)
        child.stdout.close()
        if child.wait(60) != 0 or line.strip() != "imported":
            raise RuntimeError("python -c 'import torch, fastapi' failed")
        port = free_port()
        with open(log_path, "ab") as out:
            t0 = time.perf_counter()
            proc = subprocess.Popen([python, "-m", "app", "--host", HOST, "--port", str(port), "--device",
                                     args.device, "--workers", "1", "--log-level", args.log_level],
                                    cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_healthy(proc, port, 90)
            starts.append(time.perf_counter() - t0)
        finally:
            stop(proc)
    figures["startup_s"], figures["import_s"] = median(starts), median(imports)
    details["startup_runs_s"], details["import_runs_s"] = starts, imports
    log(f"start-up {figures['startup_s']:.2f} s (runs {[round(x, 2) for x in starts]}), "
        f"import torch, fastapi {figures['import_s']:.2f} s")


# ---------------------------------------------------------------- engine

def _rss_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    try:  # Linux >= 4.0: "5" resets VmHWM to the current RSS
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def engine_phase(args, figures: dict, details: dict) -> None:
    import torch
    torch.set_num_threads(1)  # as the app does (TORCH_THREADS=1)
    from app.engine import GRPOParams, resolve_device
    from app.engine.run import run_grpo_step
    device = resolve_device(args.device)
    step = getattr(run_grpo_step, "__wrapped__", run_grpo_step)  # past the cache: every call computes

    def timed(params):
        w0, c0 = time.perf_counter(), time.process_time()
        result = step(params, device)
        return time.perf_counter() - w0, time.process_time() - c0, result

    for i in range(args.engine_warmup):
        step(GRPOParams(seed=900_000 + i), device)
    seeds = iter(range(10**6))

    def measure_step(n: int, label: str) -> None:
        """n uncached steps (fresh seeds); called right before and after the uncached
        wrk run, so the step time and the latency it is compared with share the machine's load."""
        walls, cpus = details.setdefault("_step_walls", []), details.setdefault("_step_cpus", [])
        w_run = []
        for _ in range(n):
            w, c, _ = timed(GRPOParams(seed=next(seeds)))
            walls.append(w)
            cpus.append(c)
            w_run.append(w)
        details.setdefault("engine_step_ms_by_run", {})[label] = median(w_run) * 1e3
        figures["engine_step_ms"] = median(walls) * 1e3
        figures["engine_step_cpu_ms"] = median(cpus) * 1e3
        log(f"engine step ({label}) {median(w_run) * 1e3:.2f} ms wall; so far {figures['engine_step_ms']:.2f} ms wall, "
            f"{figures['engine_step_cpu_ms']:.2f} ms CPU (median of {len(walls)})")

    args.measure_step = measure_step
    measure_step(args.engine_runs // 3, "alone")

    # Scaling in G: time (CPU time: robust to other load on the machine) and memory.
    scaling = {}
    for g in GROUP_SIZES:
        step(GRPOParams(group_size=g, seed=800_000), device)  # warm this size
        runs = [timed(GRPOParams(group_size=g, seed=700_000 + r)) for r in range(args.scaling_runs)]
        gc.collect()
        can_reset = _reset_peak_rss()
        rss0 = _rss_kib("VmRSS")
        tracemalloc.start()
        result = step(GRPOParams(group_size=g, seed=600_000), device)
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        hwm = _rss_kib("VmHWM") if can_reset else _rss_kib("VmRSS")  # fallback: RSS with the result alive
        del result
        gc.collect()
        scaling[g] = {"wall_ms": median([r[0] for r in runs]) * 1e3, "cpu_ms": median([r[1] for r in runs]) * 1e3,
                      "py_peak_kib": peak / 1024, "result_kib": current / 1024,
                      "rss_peak_delta_kib": (hwm - rss0) if hwm is not None and rss0 is not None else float("nan"),
                      "rss_measure": "VmHWM after reset" if can_reset else "VmRSS with the result alive"}
        figures[f"step_ms_g{g}"] = scaling[g]["cpu_ms"]
        figures[f"step_py_peak_kib_g{g}"] = scaling[g]["py_peak_kib"]
        figures[f"step_result_kib_g{g}"] = scaling[g]["result_kib"]
        figures[f"step_rss_peak_delta_kib_g{g}"] = scaling[g]["rss_peak_delta_kib"]
        log(f"G={g:5d}: {scaling[g]['cpu_ms']:.2f} ms CPU ({scaling[g]['wall_ms']:.2f} wall), python peak "
            f"{peak / 1024:.0f} KiB, result kept {current / 1024:.0f} KiB, RSS peak +{scaling[g]['rss_peak_delta_kib']} KiB")
    details["group_scaling"] = scaling
    figures["step_growth_g4096_over_g8"] = scaling[4096]["cpu_ms"] / scaling[8]["cpu_ms"]
    # Empirical order k in time ~ G^k between G=8 and G=4096 (1 = linear).
    figures["step_growth_order"] = math.log(figures["step_growth_g4096_over_g8"]) / math.log(4096 / 8)

    # A whole training path as its iteration count doubles, uncached.
    from app.process_spec import load_processes
    procs = importlib.import_module("app.engine.processes")
    catalog = load_processes(ROOT / "walkthroughs" / "processes.toml")

    def clear_caches():
        for name in ("run_process", "_run_process"):
            fn = getattr(procs, name, None)
            if fn is not None and hasattr(fn, "cache_clear"):
                fn.cache_clear()

    clear_caches()
    procs.run_process(catalog, args.process, 424_242, iterations_scale=1)  # warm-up
    path = {}
    for s in SCALES:
        runs = []
        for r in range(args.process_runs):
            clear_caches()  # the path and every path it builds on are recomputed
            w0, c0 = time.perf_counter(), time.process_time()
            procs.run_process(catalog, args.process, 1000 + r, iterations_scale=s)
            runs.append((time.perf_counter() - w0, time.process_time() - c0))
        path[s] = {"wall_s": median([w for w, _ in runs]), "cpu_s": median([c for _, c in runs])}
        figures[f"process_s_x{s}"] = path[s]["cpu_s"]
        log(f"process {args.process} x{s}: {path[s]['cpu_s']:.3f} s CPU ({path[s]['wall_s']:.3f} wall)")
    clear_caches()
    details["process_scaling"] = {"process": args.process, **{f"x{s}": v for s, v in path.items()}}
    figures["process_growth_x8_over_x1"] = path[8]["cpu_s"] / path[1]["cpu_s"]
    figures["process_growth_order"] = math.log(figures["process_growth_x8_over_x1"]) / math.log(8)


# ---------------------------------------------------------------- targets and the table

def evaluate(f: dict) -> list[dict]:
    def target(key, name, value, op, limit, limit_text, unit, tolerance=1.0):
        ratio = value / limit if limit else float("nan")
        met = (ratio <= tolerance) if op == "<=" else (ratio >= tolerance)
        return {"key": key, "name": name, "value": value, "unit": unit, "op": op, "limit": limit,
                "limit_text": limit_text, "ratio": ratio, "tolerance": tolerance,
                "met": bool(met) if not math.isnan(ratio) else False}

    uncached_limit = f["healthz_c1_p50_ms"] + 2 * f["engine_step_ms"]
    return [
        target("cached_vs_healthz", "cached tensors throughput", f["tensors_cached_rps"], ">=",
               0.8 * f["healthz_rps"], f"≥ 0.8 × /healthz = {0.8 * f['healthz_rps']:.0f}", "req/s"),
        target("fragment_vs_healthz", "step-change fragment throughput", f["fragment_rps"], ">=",
               0.5 * f["healthz_rps"], f"≥ 0.5 × /healthz = {0.5 * f['healthz_rps']:.0f}", "req/s"),
        target("uncached_latency", "uncached tensors p50 (1 connection)", f["tensors_uncached_c1_p50_ms"], "<=",
               uncached_limit, f"≤ /healthz p50 + 2 × step = {uncached_limit:.2f}", "ms"),
        target("first_load", "first load, transferred", f["first_load_bytes"], "<=", FIRST_LOAD_LIMIT_BYTES,
               f"≤ {FIRST_LOAD_LIMIT_BYTES}", "bytes"),
        target("dcl", "DOMContentLoaded, /", f["dcl_ms"], "<=", DCL_LIMIT_MS, f"≤ {DCL_LIMIT_MS:.0f}", "ms"),
        target("startup", "start-up to first 200", f["startup_s"], "<=", 1.5 * f["import_s"],
               f"≤ 1.5 × import = {1.5 * f['import_s']:.2f}", "s"),
        target("step_growth", "step time G=4096 / G=8", f["step_growth_g4096_over_g8"], "<=", 4096 / 8,
               f"≤ 4096/8 = 512 (linear, +{GROWTH_NOISE:.0%} noise)", "×", 1 + GROWTH_NOISE),
        target("process_growth", "path time ×8 / ×1 iterations", f["process_growth_x8_over_x1"], "<=", 8,
               f"≤ 8 (linear, +{GROWTH_NOISE:.0%} noise)", "×", 1 + GROWTH_NOISE),
    ]


def fmt(v, unit=""):
    if isinstance(v, str):
        return v
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if unit == "bytes" or (isinstance(v, int) and not isinstance(v, bool)):
        return f"{int(v):,}".replace(",", " ")
    a = abs(v)
    text = f"{v:.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}" if a >= 1 else f"{v:.3g}"
    return text


def table_rows(f: dict, targets: list[dict], proc: str) -> list[tuple[str, str, str, str, str]]:
    by_key = {t["key"]: t for t in targets}

    def t_row(key):
        t = by_key[key]
        return (t["name"] + f" ({t['unit']})", fmt(t["value"], t["unit"]), t["limit_text"],
                f"{t['ratio']:.2f}", "yes" if t["met"] else "**no**")

    def info(name, value, unit=""):
        return (name + (f" ({unit})" if unit else ""), fmt(value, unit), "", "", "")

    rows = [
        info("/healthz throughput, before / after", f"{f['healthz_rps_before']:.0f} / {f['healthz_rps_after']:.0f}"),
        info("/healthz p50 / p99", f"{f['healthz_p50_ms']:.2f} / {f['healthz_p99_ms']:.2f}", "ms"),
        t_row("cached_vs_healthz"),
        info("cached tensors p50 / p99", f"{f['tensors_cached_p50_ms']:.2f} / {f['tensors_cached_p99_ms']:.2f}", "ms"),
        info("uncached tensors throughput", f["tensors_uncached_rps"], "req/s"),
        info("uncached tensors p50 / p99 (16 connections)",
             f"{f['tensors_uncached_p50_ms']:.2f} / {f['tensors_uncached_p99_ms']:.2f}", "ms"),
        info("full step page throughput", f["step_page_rps"], "req/s"),
        info("full step page p50 / p99", f"{f['step_page_p50_ms']:.2f} / {f['step_page_p99_ms']:.2f}", "ms"),
        t_row("fragment_vs_healthz"),
        info("fragment p50 / p99", f"{f['fragment_p50_ms']:.2f} / {f['fragment_p99_ms']:.2f}", "ms"),
        info("engine step, in-process (wall / CPU)", f"{f['engine_step_ms']:.2f} / {f['engine_step_cpu_ms']:.2f}", "ms"),
        info("/healthz p50, 1 connection (before / after)",
             f"{f['healthz_c1_p50_ms_before']:.2f} / {f['healthz_c1_p50_ms_after']:.2f}", "ms"),
        t_row("uncached_latency"),
        info("web overhead (uncached p50 − step)", f["web_overhead_ms"], "ms"),
        t_row("first_load"),
        info("first load uncompressed / seen by Chromium",
             f"{int(f['first_load_uncompressed_bytes']):,} / {int(f['first_load_browser_bytes']):,}".replace(",", " "),
             "bytes"),
        t_row("dcl"),
        info("graph visible, /", f["graph_visible_ms"], "ms"),
        info("step change, click → new step painted", f["step_change_ms"], "ms"),
        t_row("startup"),
        info("import torch, fastapi", f["import_s"], "s"),
        info("step time G = 8 / 64 / 512 / 4096",
             " / ".join(f"{f[f'step_ms_g{g}']:.2f}" for g in GROUP_SIZES), "ms CPU"),
        info("python peak G = 8 / 64 / 512 / 4096",
             " / ".join(f"{f[f'step_py_peak_kib_g{g}']:.0f}" for g in GROUP_SIZES), "KiB"),
        info("result kept (one cache entry) G = 8 / … / 4096",
             " / ".join(f"{f[f'step_result_kib_g{g}']:.0f}" for g in GROUP_SIZES), "KiB"),
        info("RSS peak delta G = 8 / … / 4096",
             " / ".join(fmt(f[f"step_rss_peak_delta_kib_g{g}"]) for g in GROUP_SIZES), "KiB"),
        t_row("step_growth"),
        info("step time order k (time ∝ G^k; 1 = linear)", f["step_growth_order"]),
        info(f"path {proc} ×1 / ×2 / ×4 / ×8 iterations",
             " / ".join(f"{f[f'process_s_x{s}']:.3f}" for s in SCALES), "s CPU"),
        t_row("process_growth"),
        info("path time order k (time ∝ iterations^k)", f["process_growth_order"]),
    ]
    return rows


def markdown_table(rows) -> str:
    head = "| figure | value | target | ratio | met? |\n|---|---:|---|---:|---|\n"
    return head + "\n".join("| " + " | ".join(r) + " |" for r in rows) + "\n"


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default=os.environ.get("BENCH_DEVICE", "cpu"),
                   help="passed to `python -m app --device` and used for the engine (env BENCH_DEVICE, default cpu)")
    p.add_argument("--smoke", action="store_true", help="~1 s per measurement, single repeats: checks the machinery")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results.json")
    p.add_argument("--python", default=sys.executable, help="interpreter that runs the app (default: this one)")
    p.add_argument("--chromium", default=os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
    p.add_argument("--duration", type=float, help="seconds per wrk run (default 5, smoke 1)")
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--log-level", default="warning", help="the app's log level (warning: no access log)")
    p.add_argument("--process", help="training path for the iteration scaling (default r1, smoke r1-zero)")
    args = p.parse_args(argv)
    smoke = args.smoke
    args.duration = args.duration or (1.0 if smoke else 5.0)
    args.process = args.process or ("r1-zero" if smoke else "r1")
    args.warmup_requests = 3 if smoke else 20
    args.starts = 1 if smoke else 5
    args.engine_warmup = 5 if smoke else 30
    args.engine_runs = 30 if smoke else 450  # a third alone, a third right before, a third right after wrk
    args.scaling_runs = 1 if smoke else 5
    args.process_runs = 1 if smoke else 3
    args.page_loads = 2 if smoke else 10
    args.step_changes = 2 if smoke else 10
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if shutil.which("wrk") is None:
        print("error: wrk not found (make bench installs it: apt-get install wrk)", file=sys.stderr)
        return 2
    if not Path(args.chromium).exists():
        print(f"error: Chromium not found at {args.chromium} (set CHROMIUM_PATH or run `make chromium`)",
              file=sys.stderr)
        return 2
    from app.engine import DeviceUnavailable, resolve_device
    try:
        resolved = resolve_device(args.device)  # the app would refuse to start: say so before anything runs
    except DeviceUnavailable as exc:
        print(f"error: --device {args.device}: {exc}", file=sys.stderr)
        return 2
    began = time.perf_counter()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    log_path = Path(tempfile.gettempdir()) / f"bench-server-{os.getpid()}.log"  # the app's own output
    log_path.write_bytes(b"")
    log(f"app output: {log_path}")
    figures: dict = {}
    details: dict = {}
    machine = machine_facts(resolved)
    machine["device_flag"] = args.device
    log(f"{machine['cpu_model']}, {machine['cores']} cores, torch {machine['torch']}, device {args.device}, "
        f"load {machine['load_avg_start'][0]:.2f}")

    startup_phase(args, figures, details, log_path)
    engine_phase(args, figures, details)
    with server(args.python, args.device, args.log_level, log_path) as (port, _proc):
        http_phase(port, args, figures, details)
        page_weight(port, figures, details)
        browser_phase(port, args, figures, details)
    figures["web_overhead_ms"] = figures["tensors_uncached_c1_p50_ms"] - figures["engine_step_ms"]
    walls = details.pop("_step_walls")
    details.pop("_step_cpus")
    details["engine_step_runs"] = len(walls)
    details["engine_step_ms_p10_p90"] = [statistics.quantiles(walls, n=10)[i] * 1e3 for i in (0, 8)] \
        if len(walls) >= 10 else None

    machine["load_avg_end"] = list(os.getloadavg())
    targets = evaluate(figures)
    rows = table_rows(figures, targets, args.process)
    table = markdown_table(rows)
    missing = [k for k in FIGURES if k not in figures]
    results = {
        "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "mode": "smoke" if args.smoke else "full",
        "seconds": round(time.perf_counter() - began, 1),
        "machine": machine,
        "settings": {"wrk": f"-t{args.threads} -c{args.connections} -d{args.duration:g}s --latency",
                     "accept_encoding": ACCEPT_ENCODING, "app_log_level": args.log_level,
                     "engine_runs": args.engine_runs, "starts": args.starts, "process": args.process,
                     "page_loads": args.page_loads, "step_changes": args.step_changes,
                     "scaling_time": "process CPU time (time.process_time), median",
                     "first_load_limit_bytes": FIRST_LOAD_LIMIT_BYTES},
        "figures": figures,
        "targets": targets,
        "details": details,
        "missing_figures": missing,
        "table_markdown": table,
    }
    args.out.write_text(json.dumps(results, indent=2, default=float, allow_nan=True) + "\n")
    print(table, end="")
    met = sum(t["met"] for t in targets)
    print(f"\n{met}/{len(targets)} targets met · {machine['cpu_model']}, {machine['cores']} cores, "
          f"torch {machine['torch']}, device {args.device} · load avg {machine['load_avg_start'][0]:.2f} → "
          f"{machine['load_avg_end'][0]:.2f} · {results['seconds']:.0f} s · {args.out}")
    if details.get("http_errors"):
        print(f"warning: non-2xx or socket errors during wrk runs: {details['http_errors']}")
    if missing:
        print(f"error: figures missing: {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
