"""Start-up: process start to the first 200 from /healthz, next to a bare
`import torch, fastapi` timed the same way.

The import is the floor no app built on torch and FastAPI can go below, so the
start-up target is stated relative to it (and holds on slow and fast machines alike).
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from bench.common import ROOT, app_command, free_port, log, median, stop, wait_healthy


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
            proc = subprocess.Popen(app_command(python, port, args.device, args.log_level),
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
