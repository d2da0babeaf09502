"""`python -m app.worker`: run training jobs only, serving nothing.

A deployment puts compute here, on any machine that reaches the same store: DATABASE_URL for
PostgreSQL (replicas and workers on other machines), or DATA_DIR's SQLite file (one machine).
One runner per lane (a toy path never waits behind a tiny-LM path) for visitors' runs, and one
start-up runner for the server's own default runs, which yields to them (app/engine/jobs/runner.py);
each claims one job at a time, renews its lease while it runs, and on SIGTERM hands its job back to
the queue. The process runs at JOB_NICE on JOB_CPUS cores (app/engine/runtime/job_cpu.py), so the
pages served beside it never wait for its CPU. `python -m
app` starts one of these beside each web process (JOB_RUNNER=process, the default) and restarts
it if it dies; `--parent-pid` makes it stop when that process is gone (even after a `kill -9`).
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

from app.engine.jobs.runner import process_runners, runner_name
from app.engine.runtime.device import set_threads
from app.engine.runtime.job_cpu import confine
from app.house import registry
from app.stores.jobs import open_job_backend
from app.stores.uploads import StoreUnavailable
from app.web.settings import Settings

log = logging.getLogger("app.jobs")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m app.worker", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parent-pid", type=int, help="stop when this process is gone")
    parser.add_argument("--lease", type=float, help="seconds a lost runner keeps its job (env JOB_LEASE_S)")
    return parser.parse_args(argv)


def devices() -> tuple[str, ...]:
    import torch

    return ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings()
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s worker %(process)d %(message)s")
    share = confine(settings.job_nice, settings.job_cpus)  # before torch spawns any thread
    set_threads(min(settings.torch_threads, len(share.cpus)))
    try:
        store = open_job_backend(settings.resolved_data_dir, settings.database_url)
    except (StoreUnavailable, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    lease = args.lease or settings.job_lease_s
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    name = runner_name()
    runners = process_runners(store, registry().tasks, devices(), lease, name,
                              threads=min(settings.torch_threads, len(share.cpus)))
    threads = [threading.Thread(target=r.run_forever, args=(stop,), name=f"runner-{i}", daemon=True)
               for i, r in enumerate(runners)]
    for thread in threads:
        thread.start()
    log.info("runner %s on %s: lanes %s, lease %.0f s, nice %d, cores %s", name, store.describe(),
             ", ".join(r.name.rsplit("/", 1)[1] for r in runners), lease, share.nice,
             ",".join(map(str, share.cpus)))
    while not stop.wait(1.0):
        if args.parent_pid and os.getppid() != args.parent_pid:  # the web process is gone
            log.info("parent %d gone: stopping", args.parent_pid)
            stop.set()
    for runner in runners:
        runner.wake.set()
        try:
            runner.release()
        except StoreUnavailable:
            pass  # the lease runs out instead
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
