"""`make bench` machinery: a tiny run writes every figure and a ratio for every target.

Checks that the benchmark works end to end (app start-up, wrk, the engine,
Chromium), never that a target is met: timings on a shared machine are noise.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slower_tier  # `make test-slower`: the whole benchmark, in its smoke settings (~5 min)

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "bench" / "run.py"


def _bench_module():
    spec = importlib.util.spec_from_file_location("bench_run", RUN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _bench_module()

WRK_OUTPUT = """\
Running 1s test @ http://127.0.0.1:8000/healthz
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.41ms    1.20ms  21.37ms   90.12%
    Req/Sec     4.71k   312.27     5.10k    80.00%
  Latency Distribution
     50%  812.00us
     75%    3.58ms
     90%    4.27ms
     99%    1.20s
  4690 requests in 1.00s, 0.87MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 7
Requests/sec:   4683.52
Transfer/sec:    0.87MB
"""


def test_wrk_output_is_parsed_with_its_units():
    r = bench.parse_wrk(WRK_OUTPUT)
    assert r["rps"] == 4683.52
    assert r["p50_ms"] == pytest.approx(0.812)
    assert r["p75_ms"] == pytest.approx(3.58)
    assert r["p99_ms"] == pytest.approx(1200.0)
    assert r["requests"] == 4690
    assert (r["non_2xx"], r["socket_errors"]) == (7, 3)


def test_ratios_point_the_same_way_for_both_kinds_of_target():
    figures = {k: 1.0 for k in bench.FIGURES}
    figures.update(healthz_rps=1000.0, tensors_cached_rps=900.0, fragment_rps=400.0,
                   first_load_bytes=40_000, dcl_ms=300.0, import_s=2.0, startup_s=2.0,
                   step_growth_g4096_over_g8=600.0, process_growth_x8_over_x1=8.4)
    t = {x["key"]: x for x in bench.evaluate(figures)}
    assert set(t) == set(bench.TARGETS)
    assert t["cached_vs_healthz"]["ratio"] == pytest.approx(900 / 800) and t["cached_vs_healthz"]["met"]
    assert t["fragment_vs_healthz"]["ratio"] == pytest.approx(400 / 500) and not t["fragment_vs_healthz"]["met"]
    assert t["first_load"]["met"] and not t["dcl"]["met"] and t["startup"]["met"]
    assert not t["step_growth"]["met"]  # 600/512: past the noise allowance
    assert t["process_growth"]["met"]  # 8.4/8: within it


def test_phases_are_selected_by_name_in_run_order():
    assert bench.select_phases("all", "") == bench.PHASES
    assert "paths" not in bench.select_phases("all", "paths")
    assert bench.select_phases("tiny_lm_page,token_step", None) == ("token_step", "tiny_lm_page")
    assert bench.select_phases("http", "") == ("engine", "http")  # http takes engine step samples
    with pytest.raises(ValueError, match="unknown phase"):
        bench.select_phases("token_step,nope", "")


def test_a_partial_run_reports_only_the_targets_it_has_figures_for():
    figures = {"token_step_recorded_ms": 40.0, "tiny_lm_torch_threads": 1, "tiny_lm_page_max_gzip_bytes": 120_000}
    t = {x["key"]: x for x in bench.evaluate(figures)}
    assert set(t) == {"token_step", "tiny_lm_page"}
    assert t["token_step"]["ratio"] == pytest.approx(0.8) and t["token_step"]["met"]
    assert not t["tiny_lm_page"]["met"]  # 120 000 > 100 000 bytes


@pytest.mark.browser
def test_smoke_run_writes_every_figure_and_target(tmp_path):
    assert shutil.which("wrk"), "wrk is not installed: `make test` installs it (system-deps)"
    out = tmp_path / "results.json"
    env = {**os.environ, "CHROMIUM_PATH": os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")}
    env.pop("COMPUTE_PROCESSES", None)  # conftest's 0 is for in-process apps: bench the server's default
    proc = subprocess.run([sys.executable, str(RUN), "--smoke", "--device", "cpu", "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"bench failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    results = json.loads(out.read_text())

    assert results["mode"] == "smoke"
    assert results["phases"] == list(bench.PHASES)
    assert results["settings"]["paths_scale"] < 0.1  # the smoke run never trains the full paths
    assert results["missing_figures"] == []
    for key in bench.FIGURES:
        value = results["figures"].get(key)
        assert isinstance(value, (int, float)) and math.isfinite(value), f"figure {key}: {value!r}"
    targets = {t["key"]: t for t in results["targets"]}
    assert set(targets) == set(bench.TARGETS)
    for key, t in targets.items():
        assert math.isfinite(t["ratio"]) and t["ratio"] > 0, f"target {key}: ratio {t['ratio']!r}"
        assert isinstance(t["met"], bool)
    machine = results["machine"]
    assert machine["device"] == "cpu" and machine["cores"] >= 1
    assert machine["cpu_model"] and machine["torch"]
    assert results["details"]["first_load_files"][0]["path"] == "/walkthroughs/toy_grpo/steps/advantages"  # a step page
    assert [p["status"] for p in results["details"]["tiny_lm_pages"]] == [[200, 200]] * 7
    assert results["details"]["paths"]["distillation"]["r1_cached"]
    # the step record (issue 23): five pages, each 200 cold, warm and for its weight; six new uploads
    record = results["details"]["record"]
    assert [p["step"] for p in record["pages"]] == ["group", "ratio", "kl", "loss", "diagnostics"]
    assert all(set(p["status"]) == {200} and p["gzip_encoding"] == "gzip" for p in record["pages"]), record["pages"]
    assert [u["status"] for u in record["uploads"]] == [201] * 6
    # a whole run (issue 34), at the smoke's size: opened twice (the second from the index), every explorer answer 200
    run = results["details"]["run"]
    assert run["open_cold"]["status"] == 0 and not run["open_cold"]["indexed"]
    assert run["open_warm"]["status"] == 0 and run["open_warm"]["indexed"]
    assert run["reader"]["steps"] == run["held"]["token_steps"] > 0 and run["reader"]["refused"] == 0
    assert run["held"]["logged_steps"] == 200 and len(run["held"]["recorded_steps"]) == 2
    assert run["html"]["cold"][0] == 200 and {h[0] for h in run["html"]["warm"]} == {200}
    # comparing and following (issue 50): four runs compared, every answer 200; the follower caught up with the
    # writer's last step and stopped cleanly on Ctrl-C
    compared = results["details"]["compare_follow"]
    assert len(compared["ids"]) == 4
    assert {compared["compare"]["cold"][0], *(w[0] for w in compared["compare"]["warm"])} == {200}
    follow = compared["follow"]
    assert follow["last_stored"] == follow["last_written"] and follow["exit"] == 0, follow
    # the real model (issue 33), on the suite's tiny GGUF: a cold load that converts, a cached one that does
    # not, one step, its six finished pages (200 each: first GET, response cache, rendered again), two layouts
    smol = results["details"]["smollm"]
    assert smol["smoke"] and (smol["group_size"], smol["new_tokens"]) == (2, 6)
    assert smol["runs"]["cold"]["meta"]["converted"] and not smol["runs"]["step"]["meta"]["converted"]
    assert [p["step"] for p in smol["pages"]["pages"]] == ["sample", "advantages", "ratio", "blocks", "attention",
                                                          "update"]
    assert all(p[k]["status"] == 200 for p in smol["pages"]["pages"] for k in ("first", "second", "rendered_again"))
    assert smol["layout"]["nodes"] == 1825 and smol["layout"]["blocks12"]["nodes_drawn"] > \
        smol["layout"]["overview"]["nodes_drawn"]
    # the first minute (issue 47): two fresh servers, every first page answered 200 (the run example after its
    # 303), the real model's default step computed among the start-up runs and alone
    first = results["details"]["first_minute"]
    for mode in ("on", "off"):
        assert set(first[mode]["statuses"].values()) == {200}, first[mode]["statuses"]
        assert first[mode]["ready_s"] >= first[mode]["healthz_s"] > 0 and first[mode]["smol_step_s"] > 0
    assert not results["details"].get("http_errors"), results["details"]["http_errors"]
    # One table, one row per target, printed and stored.
    assert "| figure | value | target | ratio | met? |" in proc.stdout
    assert results["table_markdown"].count("\n") > len(bench.TARGETS)
