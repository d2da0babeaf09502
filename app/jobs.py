"""`python -m app.jobs list|show ID|delete ID...|retry ID...`: the operator's view of training jobs.

Reads the same settings as the server (DATA_DIR or DATABASE_URL), so it sees the store every
worker and replica uses. A job's result is kept until deleted here; a deleted job is computed
again (once) the next time a page asks for it. `retry` queues a failed job again.
"""
from __future__ import annotations

import argparse
import sys
import time

from app.stores.jobs import JobRecord, open_job_backend
from app.stores.uploads import StoreUnavailable
from app.web.settings import Settings


def _stamp(when: float | None) -> str:
    return "-" if when is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(when))


def line(job: JobRecord) -> str:
    seconds = "-" if job.seconds is None else f"{job.seconds:.1f}s"
    return (f"{job.id}  {job.state:<7} {100 * job.fraction:5.1f}%  runs {job.attempts}  {seconds:>7}  "
            f"{job.result_size or 0:>9}  {_stamp(job.created_at)}  {job.title}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m app.jobs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every job: id, state, progress, runs, seconds, result bytes, created (UTC), title")
    show = sub.add_parser("show", help="one job in full: runner, times, error, takeovers")
    show.add_argument("id")
    for name, text in (("delete", "delete jobs and their results (the next request computes them again)"),
                       ("retry", "queue failed jobs again")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("ids", nargs="+", metavar="ID")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        store = open_job_backend(Settings().resolved_data_dir, Settings().database_url)
    except (StoreUnavailable, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return run(args, store)
    except StoreUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()


def run(args: argparse.Namespace, store) -> int:
    if args.command == "list":
        print(f"store: {store.describe()}")
        for job in store.listing():
            print(line(job))
        return 0
    if args.command == "show":
        job = store.get(args.id)
        if job is None:
            print(f"no job {args.id!r}", file=sys.stderr)
            return 1
        print(line(job))
        for key in ("kind", "task", "device", "code_version", "runner", "stage", "step", "done", "total", "error"):
            print(f"  {key}: {getattr(job, key)}")
        print(f"  started: {_stamp(job.started_at)}  finished: {_stamp(job.finished_at)}")
        print(f"  params: { {k: v for k, v in job.params.items() if k != 'catalog'} }")
        for note in job.history.splitlines():
            print(f"  history: {note}")
        return 0
    act = store.delete if args.command == "delete" else store.retry
    missing = [ident for ident in args.ids if not act(ident)]
    for ident in args.ids:
        if ident not in missing:
            print(f"{'deleted' if args.command == 'delete' else 'queued again'} {ident}")
    for ident in missing:
        print(f"no {'job' if args.command == 'delete' else 'failed job'} {ident!r}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
