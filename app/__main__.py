"""`python -m app`: serve the walkthrough. Flags override environment variables.
`python -m app COMMAND ...`: a kind's own subcommand (`open FILE [--serve]`: a step record's)."""
from __future__ import annotations

import argparse
import os
import sys

import uvicorn

from app.engine.runtime.device import DeviceUnavailable, resolve_device
from app.web.kind import Cli, KindRegistry
from app.web.middleware.limits import uvicorn_options
from app.web.settings import Settings


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m app", description=__doc__)
    parser.add_argument("--host", help="interface to bind (env HOST, default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (env PORT, default 8000)")
    parser.add_argument("--walkthroughs", metavar="DIR", help="folder of *.json snapshots (env WALKTHROUGHS_DIR)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], help="torch device (env DEVICE, default auto)")
    parser.add_argument("--workers", type=int, help="worker processes (env WORKERS, default 1)")
    parser.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"])
    parser.add_argument("--no-runner", action="store_true",
                        help="serve only: training jobs are left to `python -m app.worker` processes sharing "
                             "the store (env JOB_RUNNER=off; the default starts one runner per web process)")
    return parser.parse_args(argv)


def run_command(name: str, argv: list[str], kinds: KindRegistry | None = None) -> int:
    from app.house import registry  # the kinds only when a command is asked for

    kinds = kinds or registry()
    command = kinds.commands.get(name)
    if command is None:
        known = ", ".join(sorted(kinds.commands)) or "none"
        print(f"error: unknown command {name!r} (commands: {known}; or flags: python -m app --help)",
              file=sys.stderr)
        return 2
    return command(argv, Cli(kinds, main))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and not argv[0].startswith("-"):  # a kind's subcommand (Kind.commands)
        return run_command(argv[0], argv[1:])
    args = parse_args(argv)
    overrides = {k: v for k, v in {
        "host": args.host, "port": args.port, "walkthroughs_dir": args.walkthroughs,
        "device": args.device, "workers": args.workers, "log_level": args.log_level,
        "job_runner": "off" if args.no_runner else None,
    }.items() if v is not None}
    settings = Settings(**overrides)
    try:
        resolve_device(settings.device)  # fail fast, before binding a port
    except DeviceUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # Workers are separate processes: hand them the effective settings via env.
    # HOST and PORT too: the app says its URL when it is ready (app/web/warm_up.py).
    os.environ.update({"WALKTHROUGHS_DIR": str(settings.walkthroughs_dir), "DEVICE": settings.device,
                       "JOB_RUNNER": settings.job_runner, "HOST": settings.host, "PORT": str(settings.port)})
    # Limits at the edge (docs/reference/configuration.md "Limits"): httptools plus a 431 head cap and a header timeout
    # (HEADER_TIMEOUT_S, read by each worker from the environment), idle keep-alive closed.
    uvicorn.run("app.main:create_app", factory=True, host=settings.host, port=settings.port,
                workers=settings.workers, log_level=settings.log_level,
                **uvicorn_options(settings.max_header_kb * 1024, settings.keep_alive_s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
