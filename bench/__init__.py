"""The benchmark behind `make bench` (bench/README.md); `bench/run.py` is the entry point.

A package so that run.py, executed as a file, can import its parts as `bench.*`:

    common.py           constants, logging, one-shot GET, starting and stopping the app
    wrk.py              running wrk and reading its output
    phases/startup.py   process start to first 200, against a bare `import torch, fastapi`
    phases/engine.py    the engine in this process: one step, scaling in G, scaling in iterations
    phases/http.py      throughput and latency of each endpoint under wrk
    phases/page_weight.py  bytes of the first load, as a client fetches them
    phases/browser.py   DOMContentLoaded, graph visible and step change in headless Chromium
    report.py           figure and target names, targets with ratios, the table
"""
