"""`python -m app open RUN_DIR --follow [--interval S]` (issue 50): follow a run folder as the trainer writes it.

Polls the folder's files (sizes and mtimes) every S seconds (1 by default), stores what is new under one stable run
id for the folder (domain/run_follow.py says why the id is the folder's), and prints one line per update: the steps,
the recorded steps and the findings, the new ones named. A file still being written is never said to be refused
(engine/run_follower.py). The explorer at the printed URL shows each update in place while the follower runs.
Ctrl-C stops it cleanly (exit 0): the page then says following ended. So does SIGTERM (a service manager's, a
container's stop), at the end of the look under way: never mid-write. A folder followed already (by a server's
Follow button or another command, its heartbeat fresh) is refused (exit 1): two followers would store every version
twice and delete each other's.
"""
from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.domain.uploads import UploadStore
from app.runs.domain.run_follow import STALE_S, follow_id
from app.runs.engine.run_follower import SETTLE_S, Follower
from app.runs.views import urls
from app.runs.web.run_pages import store_for
from app.stores.uploads import StoreUnavailable
from app.web.kind import Cli
from app.web.settings import Settings


@contextmanager
def _terminated() -> Iterator[threading.Event]:
    """An event set on SIGTERM while the follower runs (the main thread's handler only; put back after)."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    before = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, before)


def follow(path: Path, settings: Settings, uploads: UploadStore, interval: float, settle: float = SETTLE_S) -> int:
    if not path.is_dir():
        print(f"error: --follow takes a run folder, not a file: {path}", file=sys.stderr)
        uploads.close()
        return 2
    runs = store_for(settings, uploads.backend)
    ident = follow_id(path)
    state = runs.follows.read(ident)
    now = time.time()
    if state is not None and state.following(now):  # a server's follower, or another command's: never two at once
        print(f"error: {path} is followed already (its last sign of life {now - state.heartbeat:.0f} s ago): "
              f"open http://{settings.host}:{settings.port}{urls.run(ident)}. If that follower is gone, this "
              f"works again once its heartbeat is {STALE_S:.0f} s old.", file=sys.stderr)
        uploads.close()
        return 1
    follower = Follower(path, runs, uploads, settle=settle, say=lambda line: print(line, flush=True))
    print(f"following {path} every {interval:g} s as run {follower.id} (Ctrl-C to stop)")
    print(f"open http://{settings.host}:{settings.port}{urls.run(follower.id)}", flush=True)
    try:
        with _terminated() as terminated:
            follower.run(interval, terminated.is_set)  # SIGTERM: stops after the look under way, said ended
        print(f"stopped following {path} after {follower.state.version} updates", flush=True)
    except KeyboardInterrupt:
        print(f"stopped following {path} after {follower.state.version} updates", flush=True)
    except StoreUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        uploads.close()
    return 0


def follow_main(path: Path, settings: Settings, cli: Cli, interval: float) -> int:
    from app.runs.web.open_command import _uploads

    try:
        uploads = _uploads(settings, cli)
    except StoreUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return follow(path, settings, uploads, interval)


__all__ = ["follow", "follow_main"]
