"""A whole run at the issue's scale (issue 34): 10,000 logged steps, 20 recorded G 16 × 4,096 steps and about 1 GB of
prime-rl token exports in one run directory, opened with `python -m app open RUN_DIR` and looked at in the explorer.

The directory, built in a temporary folder and removed afterwards:
- trainer_state.json: 10,000 entries of the keys TRL's GRPOTrainer logs (tests/runs/run_fixtures.py's
  `entry`, loaded by path);
- step-records/: 20 step records at G 16 × 4,096 tokens (record.py's factory), each at a logged step;
- token_exports/step_N/rank_R.jsonl: prime-rl's export format (tests/runs/token_fixtures.py's
  `prime_rl_line`, field for field), 2 ranks per step, every 200th step, 48 sequences per rank of 64 prompt +
  1,024 completion tokens, until the files hold ~1 GB (the lines of one step are made once and written for every
  step, the step field changed: what is timed is the reading, not the making).

Measured, each `open` a fresh process over a fresh DATA_DIR, its peak RSS from os.wait4 (ru_maxrss):
- cold: the first opening (the run, 20 records stored and recomputed for their checks, every token file read);
- warm: the same command again (the index holds the token numbers; the records are already stored, their checks
  recomputed again, as the command prints them);
- the token reader alone (read_token_run over the 1 GB) in a process of its own: the kernel's VmRSS after its
  imports, after the read, and VmHWM (the peak) before and after it, and its time, so the memory bound is the
  reader's, not the records'. Its growth is VmHWM after the read less VmRSS before it: the import of torch peaks
  above where it settles, so VmHWM alone would hide a reader that grew less than that;
- the explorer (`/runs/<id>`) in headless Chromium at 1280×720, fresh context per load: navigation start → the
  first frame with the first chart visible; cold (first request after the app started) and warm (median);
  its HTML raw and gzip; `GET /api/runs/<id>` (every metric's points, M4-cut) cold and warm, and its size;
  a zoomed window of 100 steps;
- the explorer's HTML alone (issue 50: target ≤ 150 ms warm): `GET /runs/<id>` with `Accept-Encoding: gzip, br`,
  request sent → last byte read, once right after the API's first read (the run parsed), then warm (median).
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ACCEPT_ENCODING, HOST, ROOT, get, log, median, server
from bench.phases.browser import CHROMIUM_ARGS, visible_watch
from bench.phases.record import _file, _make_record

FIXTURES = ROOT / "tests" / "runs"
VIEWPORT = {"width": 1280, "height": 720}
CHART_WATCH = visible_watch(".run-chart", "chartVisible")
TIMING = """() => { const n = performance.getEntriesByType('navigation')[0];
  return {html: n.responseEnd, chartVisible: window.__bench.chartVisible, fcp: window.__bench.fcp ?? null}; }"""
READER = """
import json, sys, time
from pathlib import Path
from app.runs.engine.token_run import read_token_run

def status(key):  # kB, from the kernel: VmRSS now, VmHWM the peak so far
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])

base, base_peak = status("VmRSS"), status("VmHWM")
t0 = time.perf_counter()
run = read_token_run(Path(sys.argv[1]))
took = time.perf_counter() - t0
print(json.dumps({"base_kib": base, "base_peak_kib": base_peak, "after_kib": status("VmRSS"),
                  "peak_kib": status("VmHWM"), "seconds": took, "files": run.files, "steps": len(run.metrics),
                  "refused": len(run.refused)}))
"""


def _fixture(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", FIXTURES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def sizes(smoke: bool) -> dict:
    if smoke:
        return {"steps": 200, "records": 2, "record_tokens": 256, "token_bytes": 4 * 2**20, "every": 20,
                "completion": 256, "per_rank": 4}
    return {"steps": 10_000, "records": 20, "record_tokens": 4096, "token_bytes": 2**30, "every": 200,
            "completion": 1024, "per_rank": 48}


def build_run(root: Path, n: dict) -> dict:
    """The run directory; returns what it holds."""
    import numpy as np

    runs, tokens = _fixture("run_fixtures"), _fixture("token_fixtures")
    root.mkdir(parents=True)
    steps = n["steps"]
    (root / "trainer_state.json").write_text(json.dumps(runs.state([runs.entry(s) for s in range(1, steps + 1)])))
    make_record = _make_record()
    records = root / "step-records"
    records.mkdir()
    recorded = [round(steps * (k + 1) / n["records"]) for k in range(n["records"])]
    record_bytes = 0
    for k, step in enumerate(recorded):
        record = make_record(seed=34_000 + k, groups=1, size=16, lengths=(n["record_tokens"], n["record_tokens"]),
                             packed=True)
        record["run"]["step"] = step
        body = _file(record)
        record_bytes += len(body)
        (records / f"step-{step:05d}.grpo-step.json").write_bytes(body)
    rng = np.random.default_rng(34)
    lines = {}
    for rank in (0, 1):  # one step's lines, made once, the step field set per step below
        seqs = [tokens.random_seq(rng, prompt=64, n=n["completion"], outliers=2) for _ in range(n["per_rank"])]
        lines[rank] = "".join(json.dumps(tokens.prime_rl_line(s, 0, rank, i), separators=(",", ":")) + "\n"
                              for i, s in enumerate(seqs))
    per_step = sum(len(t.encode()) for t in lines.values())
    token_steps = [s for s in range(n["every"], steps + 1, n["every"])][: max(1, n["token_bytes"] // per_step)]
    written = 0
    for step in token_steps:
        folder = root / "token_exports" / f"step_{step}"
        folder.mkdir(parents=True)
        for rank, text in lines.items():
            body = text.replace('"step":0,', f'"step":{step},').encode()
            (folder / f"rank_{rank}.jsonl").write_bytes(body)
            written += len(body)
        (folder / "STABLE").touch()
    return {"logged_steps": steps, "recorded_steps": recorded, "record_bytes": record_bytes,
            "token_steps": len(token_steps), "token_files": 2 * len(token_steps), "token_bytes": written,
            "sequences_per_step": 2 * n["per_rank"], "tokens_per_sequence": 64 + n["completion"],
            "state_bytes": (root / "trainer_state.json").stat().st_size,
            "total_bytes": sum(p.stat().st_size for p in root.rglob("*") if p.is_file())}


def _open(python: str, run_dir: Path, env: dict) -> dict:
    """`python -m app open RUN_DIR` in a fresh process, timed, its peak RSS by wait4."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([python, "-m", "app", "open", str(run_dir)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()  # the output is a few KB: read to the end, then reap with its rusage
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    took = time.perf_counter() - t0
    url = next((line.split(f"{HOST}:")[-1].split("/", 1)[-1] for line in out.splitlines()
                if line.startswith("open http://")), None)
    return {"status": proc.returncode, "seconds": took, "peak_rss_mb": usage.ru_maxrss / 1024,
            "path": "/" + url if url else None, "indexed": "from the index" in out, "output": out[-4000:]}


def _reader(python: str, run_dir: Path) -> dict:
    """read_token_run alone in a fresh process: its time, RSS after the imports and at the peak."""
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: stdout is read to its end before the reaping
        proc = subprocess.Popen([python, "-c", READER, str(run_dir)], cwd=ROOT, stdout=subprocess.PIPE, stderr=err)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"read_token_run failed: {err.read().decode()[-2000:]}")
    got = json.loads(out)
    got["process_peak_kib"] = usage.ru_maxrss
    return got


def _load(browser, url: str) -> dict:
    ctx = browser.new_context(viewport=VIEWPORT)
    ctx.add_init_script(CHART_WATCH)
    try:
        page = ctx.new_page()
        response = page.goto(url, wait_until="load", timeout=120_000)
        page.wait_for_function("() => window.__bench && window.__bench.chartVisible !== undefined", timeout=30_000)
        t = page.evaluate(TIMING)
        t["status"] = response.status if response else None
        t["first_view"] = max(t["chartVisible"], t["fcp"] or 0)
        return t
    finally:
        ctx.close()


def _api(port: int, path: str) -> tuple[int, float, int]:
    t0 = time.perf_counter()
    status, _h, body = get(port, path, {"Accept-Encoding": "identity"}, timeout=120)
    return status, (time.perf_counter() - t0) * 1e3, len(body)


def _html(port: int, path: str) -> tuple[int, float, int]:
    """The explorer page as a browser asks for it (gzip, br): status, ms to the last byte, bytes transferred."""
    t0 = time.perf_counter()
    status, _h, body = get(port, path, {"Accept-Encoding": ACCEPT_ENCODING}, timeout=120)
    return status, (time.perf_counter() - t0) * 1e3, len(body)


def run_phase(args, figures: dict, details: dict, log_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    n = sizes(args.smoke)
    work = Path(tempfile.mkdtemp(prefix="bench-run-"))
    try:
        t0 = time.perf_counter()
        held = build_run(work / "run", n)
        log(f"run: built {held['logged_steps']} logged steps, {len(held['recorded_steps'])} records, "
            f"{held['token_files']} token files ({held['token_bytes'] / 2**20:.0f} MiB) in "
            f"{time.perf_counter() - t0:.0f} s")
        env = {**os.environ, "DATA_DIR": str(work / "store")}
        env.pop("DATABASE_URL", None)
        cold = _open(args.python, work / "run", env)
        warm = _open(args.python, work / "run", env)
        for name, o in (("cold", cold), ("warm", warm)):
            log(f"run: open {name} {o['seconds']:.1f} s, peak RSS {o['peak_rss_mb']:.0f} MB, exit {o['status']}")
        reader = _reader(args.python, work / "run")
        log(f"run: read_token_run {reader['seconds']:.1f} s, VmRSS {reader['base_kib'] / 1024:.0f} MB after imports "
            f"(VmHWM {reader['base_peak_kib'] / 1024:.0f}), {reader['after_kib'] / 1024:.0f} MB after the read "
            f"(VmHWM {reader['peak_kib'] / 1024:.0f})")
        path = cold["path"]
        if path is None or cold["status"] != 0:
            raise RuntimeError(f"python -m app open failed: {cold['output']}")
        rid = path.rsplit("/", 1)[-1]
        api_path = f"/api/runs/{rid}"
        zoom = f"{path}?from={n['steps'] // 2}&to={n['steps'] // 2 + 100}"
        with server(args.python, args.device, args.log_level, log_path, env={"DATA_DIR": str(work / "store")}) as \
                (port, _proc), sync_playwright() as pw:
            base = f"http://{HOST}:{port}"
            api_cold = _api(port, api_path)  # the first read of the run in this app: parse + M4 + JSON
            # issue 50: the explorer's HTML alone, request sent -> last byte read (no response cache on /runs/: each
            # GET renders); the first after the API's parse, then warm (the target is on their median)
            html_cold = _html(port, path)
            html_warm = [_html(port, path) for _ in range(args.explorer_requests)]
            browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS, headless=True)
            try:
                ctx = browser.new_context(viewport=VIEWPORT)
                ctx.new_page().goto(base + "/", wait_until="load")  # the browser's own start-up, not counted
                ctx.close()
                page_cold = _load(browser, base + path)
                page_warm = [_load(browser, base + path) for _ in range(args.record_loads)]
                zoom_view = _load(browser, base + zoom)
            finally:
                browser.close()
            api_warm = [_api(port, api_path) for _ in range(args.record_loads)]
            s_gz, h_gz, gz = get(port, path, {"Accept-Encoding": "gzip"}, timeout=120)
            s_raw, _h, raw = get(port, path, {"Accept-Encoding": "identity"}, timeout=120)
        figures.update(
            run_logged_steps=held["logged_steps"], run_recorded_steps=len(held["recorded_steps"]),
            run_dir_bytes=held["total_bytes"], run_token_bytes=held["token_bytes"],
            run_open_cold_s=cold["seconds"], run_open_warm_s=warm["seconds"],
            run_open_cold_rss_mb=cold["peak_rss_mb"], run_open_warm_rss_mb=warm["peak_rss_mb"],
            run_read_tokens_s=reader["seconds"], run_read_tokens_rss_mb=reader["peak_kib"] / 1024,
            run_read_tokens_rss_growth_mb=(reader["peak_kib"] - reader["base_kib"]) / 1024,
            run_page_cold_ms=page_cold["first_view"], run_page_warm_ms=median([p["first_view"] for p in page_warm]),
            run_page_zoom_ms=zoom_view["first_view"],
            run_page_bytes=len(raw), run_page_gzip_bytes=len(gz),
            run_api_cold_ms=api_cold[1], run_api_warm_ms=median([a[1] for a in api_warm]), run_api_bytes=api_cold[2],
            run_html_cold_ms=html_cold[1], run_html_warm_ms=median([h[1] for h in html_warm]))
        details["run"] = {"sizes": n, "held": held, "open_cold": cold, "open_warm": warm, "reader": reader,
                          "page_cold": page_cold, "page_warm": page_warm, "zoom": {"path": zoom, **zoom_view},
                          "api": {"path": api_path, "cold": api_cold, "warm": api_warm},
                          "html": {"path": path, "cold": html_cold, "warm": html_warm}}
        problems = []
        if warm["status"] != 0 or not warm["indexed"]:
            problems.append(f"the second open: exit {warm['status']}, indexed {warm['indexed']}")
        statuses = [page_cold["status"], *(p["status"] for p in page_warm), zoom_view["status"], api_cold[0],
                    *(a[0] for a in api_warm), s_gz, s_raw, html_cold[0], *(h[0] for h in html_warm)]
        if set(statuses) != {200} or h_gz.get("content-encoding") != "gzip":
            problems.append(f"explorer answers {statuses}, gzip {h_gz.get('content-encoding')}")
        if reader["refused"] or reader["steps"] != held["token_steps"]:
            problems.append(f"read_token_run: {reader}")
        if problems:
            details.setdefault("problems", []).append(f"run phase: {problems}")
        log(f"run: explorer first view cold {page_cold['first_view']:.0f} ms, warm "
            f"{figures['run_page_warm_ms']:.0f} ms, zoom {zoom_view['first_view']:.0f} ms; HTML {len(raw)} B, "
            f"gzip {len(gz)} B; API cold {api_cold[1]:.0f} ms, warm {figures['run_api_warm_ms']:.0f} ms, "
            f"{api_cold[2]} B; HTML alone cold {html_cold[1]:.0f} ms, warm {figures['run_html_warm_ms']:.0f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)


__all__ = ["build_run", "run_phase", "sizes"]
