"""`python -m app runs list [--json]` and `python -m app runs delete ID [ID...] [--json]`: the runs the explorer
opens, as the server of the same settings (DATA_DIR or DATABASE_URL, UPLOAD_QUOTA_MB) stores them.

`list`: one line per run (id, logged steps, the bytes its quota counts, when it was stored, its recorded steps, what
its log was read from and where), then how much of the run store's quota is used. `delete`: removes each run and
everything the store keeps for it (file, sidecars, row, links, its bytes in the database) and says what was freed;
its recorded steps stay in the upload store, only their link to the run goes. An id the store does not hold (or no
id at all, e.g. "../x") is refused with the ids it does hold, and nothing is deleted (exit 2).

Followed folders (`python -m app open RUN_DIR --follow`, or the explorer's "Follow this folder"): `list` says under
each version the followed id that stands for it and its folder, and any followed id whose version is gone; `delete`
takes a followed id too (the version it stands for is deleted and its state file removed) and removes the state files
naming any version it deletes. A folder followed now is refused until its follower stops (exit 2).
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import sys
import time
from collections.abc import Iterable

from app.domain.uploads import MB
from app.runs.domain.run_deletion import (
    DeletedRun,
    StillFollowed,
    UnknownRun,
    deletable,
    delete_with_follows,
    follow_states,
    still_followed,
)
from app.runs.domain.run_follow import FollowState
from app.runs.domain.run_listing import RunEntry, Usage, list_runs, usage
from app.runs.domain.run_store import RUN_ID, RunStore
from app.runs.views import urls
from app.runs.web.run_pages import store_for
from app.stores.uploads import StoreUnavailable, open_backend
from app.views.urls import URLS
from app.web.kind import Cli
from app.web.settings import Settings


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m app runs", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="every stored run, then the share of the quota used")
    listing.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    delete = sub.add_parser("delete", help="remove runs and all the store keeps for them (their links answer 404)")
    delete.add_argument("ids", nargs="+", metavar="ID")
    delete.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    return p


def _printable(text: str) -> str:  # a source is a path someone chose: no terminal escapes reach the screen
    return "".join(c if c.isprintable() else "?" for c in text)


def _size(n: int) -> str:
    return "0 MB" if n == 0 else f"{n / MB:,.1f} MB" if n >= 100 * 1024 else f"{n / 1024:,.1f} KB"


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))


def total_line(u: Usage) -> str:
    share = "0" if u.used == 0 else f"{u.share:.1f}" if u.share >= 0.1 else f"{u.share:.2g}"
    return (f"{u.runs} run{'' if u.runs == 1 else 's'}, {_size(u.used)} ({u.used:,} bytes) of the "
            f"{u.quota // MB:,} MB quota used ({share} %)")


def _steps(e: RunEntry) -> str:
    if not e.steps:
        return "no steps"
    if len(e.steps) == 1:
        return f"1 step ({e.steps[0]})"
    return f"{len(e.steps)} steps ({e.steps[0]}-{e.steps[-1]})"


def entry_line(e: RunEntry, followed: Iterable[FollowState] = (), now: float = 0.0) -> str:
    linked = (f"recorded steps linked: {', '.join(map(str, e.recorded))}" if e.recorded else "no recorded step")
    where = f" from {_printable(e.source)}" if e.source else ""
    tail = f"  PROBLEM: {e.problem}" if e.problem else ""
    lines = [f"{e.id}  {_steps(e)}  {_size(e.bytes)}  {_stamp(e.stored_at)} UTC  {linked}  {e.format}{where}{tail}"]
    lines.extend(follow_line(s, now) for s in followed)
    return "\n".join(lines)


def follow_line(s: FollowState, now: float) -> str:
    how = "following now" if s.following(now) else "following ended"
    return f"  followed as {s.id} ({how}, {urls.run(s.id)}) from {_printable(s.folder)}"


def _follow_json(s: FollowState, now: float) -> dict:
    return {"id": s.id, "url": urls.run(s.id), "folder": s.folder, "version": s.run, "following": s.following(now)}


def _usage_json(u: Usage) -> dict:
    return {"runs": u.runs, "bytes": u.used, "quota_bytes": u.quota, "share_percent": u.share}


def _entry_json(e: RunEntry) -> dict:
    return {"id": e.id, "url": urls.run(e.id), "source": e.source, "format": e.format, "bytes": e.bytes,
            "stored_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(e.stored_at)), "stored_at_unix": e.stored_at,
            "steps": {"count": len(e.steps), "first": e.steps[0] if e.steps else None,
                      "last": e.steps[-1] if e.steps else None},
            "recorded": [{"step": s, "upload": w, "url": URLS.walkthrough(w)} for s, w in e.recorded.items()],
            "problem": e.problem or None}


def run_list(store: RunStore, as_json: bool, where: str) -> int:
    entries = list_runs(store)
    u = usage(store)
    other = u.used - sum(e.bytes for e in entries)  # *.json in the folder that are no run's (without rows)
    now, follows = time.time(), follow_states(store).all()
    ids = {e.id for e in entries}
    by_run = {e.id: [s for s in follows if s.run == e.id] for e in entries}
    gone = [s for s in follows if s.run not in ids]  # its version deleted, or none stored yet
    if as_json:
        print(json.dumps({"store": where, "runs": [{**_entry_json(e), "followed": [_follow_json(s, now) for s in
                                                                                    by_run[e.id]]} for e in entries],
                          "followed_without_run": [_follow_json(s, now) for s in gone],
                          "usage": _usage_json(u), "other_bytes": other}))
        return 0
    for e in entries:
        print(entry_line(e, by_run[e.id], now))
    for s in gone:
        print(f"followed run {s.id} from {_printable(s.folder)}: no version stored "
              f"({'following now' if s.following(now) else f'python -m app runs delete {s.id} forgets it'})")
    if not entries:
        print(f"no run stored ({where}); `python -m app open RUN_DIR` stores one")
    if other:
        print(f"{other:,} bytes of it are in files of no run in {store.root} (*.json)")
    print(total_line(u))
    return 0


def _unknown(ids: Iterable[str], known: set[str]) -> str:
    lines = []
    for ident in ids:
        what = "no run" if RUN_ID.match(ident) else "not a run id (16 hex digits)"
        close = [k for k in sorted(known) if ident and k.startswith(ident)][:3] or difflib.get_close_matches(
            ident, sorted(known), n=3, cutoff=0.5)
        lines.append(f"error: {_printable(ident)!r}: {what}" + (f"; did you mean {', '.join(close)}?" if close else ""))
    shown = sorted(known)
    held = (f"the store holds {', '.join(shown[:20])}{' …' if len(shown) > 20 else ''} (python -m app runs list)"
            if known else "the store holds no run")
    return "\n".join([*lines, f"{held}; nothing was deleted"])


def deleted_lines(d: DeletedRun) -> list[str]:
    removed = [*d.files, *(["its database row and links"] if d.row else [])]
    if not removed and not d.unlinked:  # a followed id whose version was gone already
        return [f"forgot followed run {', '.join(d.followed)}: its version was gone already; removed its state file"]
    lines = [f"deleted run {d.id}: freed {_size(d.freed)} ({d.freed:,} bytes) of the quota; removed "
             f"{', '.join(removed)}; {urls.run(d.id)} answers 404"]
    if d.followed:
        lines.append(f"  it stood for followed run{'s' if len(d.followed) > 1 else ''} {', '.join(d.followed)}: "
                     f"{'their state files' if len(d.followed) > 1 else 'its state file'} removed, "
                     f"{', '.join(urls.run(f) for f in d.followed)} answer{'' if len(d.followed) > 1 else 's'} 404")
    if d.unlinked:
        n = len(d.unlinked)
        steps = ", ".join(f"step {s} at {URLS.walkthrough(w)}" for s, w in d.unlinked.items())
        lines.append(f"  its {n} recorded step{'' if n == 1 else 's'} stay{'s' if n == 1 else ''} in the upload "
                     f"store, unlinked from this run: {steps} (python -m app.uploads delete "
                     f"{' '.join(dict.fromkeys(d.unlinked.values()))} removes {'it' if n == 1 else 'them'})")
    return lines


def run_delete(store: RunStore, ids: list[str], as_json: bool) -> int:
    known = deletable(store) | {s.id for s in follow_states(store).all()}
    unknown = [i for i in dict.fromkeys(ids) if i not in known]
    if unknown:
        print(_unknown(unknown, known), file=sys.stderr)
        return 2
    now = time.time()
    live = [(i, s) for i in dict.fromkeys(ids) if (s := still_followed(store, i, now)) is not None]
    if live:
        for ident, s in live:
            print(f"error: run {ident}: {_printable(s.folder)} is followed now (as {s.id}); stop its follower "
                  "first (Ctrl-C, or \"Stop following\" in its explorer), or it stores the run again", file=sys.stderr)
        print("nothing was deleted", file=sys.stderr)
        return 2
    done: list[DeletedRun] = []
    for ident in dict.fromkeys(ids):
        try:
            done.append(delete_with_follows(store, ident, now))
        except UnknownRun:  # deleted by another process meanwhile: gone all the same
            print(f"run {ident}: already deleted", file=sys.stderr)
        except StillFollowed as exc:  # followed since the check above
            print(f"run {ident}: followed now (as {exc.state.id}): not deleted", file=sys.stderr)
    u = usage(store)
    if as_json:
        print(json.dumps({"deleted": [{**dataclasses.asdict(d), "unlinked": [{"step": s, "upload": w} for s, w in
                                                                             d.unlinked.items()]} for d in done],
                          "freed": sum(d.freed for d in done), "usage": _usage_json(u)}))
        return 0
    for d in done:
        print("\n".join(deleted_lines(d)))
    print("now: " + total_line(u))
    return 0


def main(argv: list[str], cli: Cli) -> int:
    args = parser().parse_args(argv)
    settings = Settings()
    try:
        backend = open_backend(settings.resolved_data_dir, settings.database_url)
    except StoreUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        store = store_for(settings, backend)
        if args.action == "list":
            return run_list(store, args.json, backend.describe())
        return run_delete(store, args.ids, args.json)
    except StoreUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        backend.close()
