"""Before/after capture of every JSON answer and page the app serves, for changes that must move URLs only.

The architecture change that moves URLs (old ones answer 308 to the new) must change nothing else a user sees:
this tool proves it. `take` starts the app of a checkout as a real server (`python -m app`, one worker, loopback,
a fresh temporary DATA_DIR, DEFAULT_RUNS off so no training runs), waits for /readyz, asks it which walkthroughs,
steps, nodes, paths and runs it has, and records every URL's status, content type, Location and normalized body
(nothing followed: a redirect is recorded as such). `compare` checks a later capture against an earlier one, URL by
URL, through the moves table `MOVES`: a moved URL must answer 308 to its new URL, which must answer what the old one
did. JSON must be byte-identical once canonicalized (keys sorted, numbers kept exactly as written).

    python -m bench.capture take /tmp/capture-before              # the current checkout
    python -m bench.capture take /tmp/capture-after --repo ../wt-x  # another checkout's app
    python -m bench.capture compare /tmp/capture-before /tmp/capture-after   # exit 1 if anything differs

Only GETs, except one POST /api/runs/examples/trl (opens the shipped TRL run: its runs pages and recorded steps).
A take lasts 35-90 s on 2 shared cores (by their load): mostly the app's own warm-up to /readyz, then 109 URLs (18
of them moved, so 127 answers, each step computed once). `compare --no-moves` compares two takes of the same code
URL by URL (0 differences: the normalization is right). OUT_DIR: one file per answer, index.json, the app's server.log.
Old URLs in the before-answers (a page's links, a JSON answer's `start` naming the POST that starts a run) are
rewritten through MOVES before comparing: the answers must agree byte for byte apart from the addresses that moved.
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from bench.common import ROOT, get, server, wait_healthy

# ---------------------------------------------------------------- what is captured

# Every app's own URLs. The rest is asked of the running app (discover()): its walkthroughs (GET /api/walkthroughs,
# plus the recorded steps of the shipped run), each one's steps and nodes, the paths (GET /api/processes) and the run.
URLS = ("/healthz", "/readyz", "/", "/walkthroughs", "/walkthroughs/new", "/docs", "/api/walkthroughs",
        "/api/processes", "/api/processes/r1-zero", "/api/schemas/step-record")
# Per walkthrough: {id}; {step}: each of its steps.
WALKTHROUGH_URLS = ("/walkthroughs/{id}", "/api/walkthroughs/{id}", "/walkthroughs/{id}/steps/{step}")
# A kind is recognised by its step JSON (today's per-kind URL): any answer but 409 ("not this kind").
KIND_PROBES = {
    "toy": "/api/walkthroughs/{id}/tensors",
    "tiny_lm": "/api/walkthroughs/{id}/tokens",
    "smollm": "/api/walkthroughs/{id}/smollm-step",  # a GET never starts the (slow) real step: 404 not started
    "step_record": "/api/walkthroughs/{id}/record",
}
# Per kind, besides its probe: {node} one node of the walkthrough, {opening} its opening step, {path} each
# training path, {step} each step. The paths API is every kind's (a 404 not started, 404 no such path or 409
# view-only answer is recorded as it is).
KIND_URLS = {
    "toy": ("/api/walkthroughs/{id}/tensors?node={node}", "/api/walkthroughs/{id}/tensors?step={opening}",
            "/api/walkthroughs/{id}/compare", "/walkthroughs/{id}/steps/{opening}?process=r1-zero",
            "/api/walkthroughs/{id}/paths/r1_zero"),  # the old path spelling
    "tiny_lm": ("/api/walkthroughs/{id}/tokens?step={opening}", "/api/walkthroughs/{id}/tokens?node={node}",
                "/walkthroughs/{id}/paths/{path}"),
    "smollm": ("/walkthroughs/{id}/smollm-paths/{path}",),
    "step_record": ("/api/walkthroughs/{id}/record?node={node}",),
}
PATHS_URL = "/api/walkthroughs/{id}/paths/{path}"
RUN_EXAMPLE = "/api/runs/examples/trl"  # POST: the one request that is not a GET
RUN_URLS = ("/runs/{run}", "/api/runs/{run}")

# The URL moves: old path (a regex naming its parts) -> new path. Query strings are carried over unchanged.
# Edit as the change lands: compare() reads the table when it runs.
_SEG = r"[^/?#\"'\s<>&]+"
MOVES: list[tuple[str, str]] = [
    (rf"/api/walkthroughs/(?P<id>{_SEG})/tensors", "/api/walkthroughs/{id}/step"),
    (rf"/api/walkthroughs/(?P<id>{_SEG})/tokens", "/api/walkthroughs/{id}/step"),
    (rf"/api/walkthroughs/(?P<id>{_SEG})/smollm-step", "/api/walkthroughs/{id}/step"),
    (rf"/api/walkthroughs/(?P<id>{_SEG})/record", "/api/walkthroughs/{id}/step"),
    (rf"/walkthroughs/(?P<id>{_SEG})/smollm-paths/(?P<path>{_SEG})", "/walkthroughs/{id}/paths/{path}"),
]
REDIRECTS = (301, 302, 303, 307, 308)

# ---------------------------------------------------------------- normalization
# Only what legitimately differs between two runs of the same code, or must not count against a move.

# JSON keys whose values are clocks or counters of time (never a computed result): the value is replaced.
VOLATILE_KEYS = frozenset({"created_at", "updated_at", "started_at", "finished_at", "claimed_at", "expires_at"})
# Keys volatile on one URL only (path regex -> keys): /readyz's warm-up duration.
VOLATILE_KEYS_AT = ((r"/readyz", frozenset({"seconds"})),)
ORIGIN = "http://APP"  # the server's own origin (its port is a free one, new each take)
_TEXT_SUBS = (
    # static files' version query (a hash of the file: moving or rebuilding assets changes it, nothing a user sees)
    (re.compile(r"(/static/[^\"'\s<>?#]*)\?v=[0-9A-Za-z._-]+"), r"\1?v=V"),
    (re.compile(r"""\bnonce=(["'])[^"']*\1"""), 'nonce="NONCE"'),  # CSP nonces, if a page ever has them
)


def normalize_text(text: str, port: int | None) -> str:
    if port is not None:
        for host in ("127.0.0.1", "localhost"):
            text = text.replace(f"http://{host}:{port}", ORIGIN)
    for pattern, repl in _TEXT_SUBS:
        text = pattern.sub(repl, text)
    return text


class Raw(str):
    """A JSON number (or NaN/Infinity) exactly as the app wrote it: never re-formatted, so compared exactly."""


def canonical_json(text: str, path: str, port: int | None) -> str:
    """Keys sorted, one value per line (for readable diffs), numbers as written, volatile keys' values replaced."""
    tree = json.loads(text, parse_float=Raw, parse_int=Raw, parse_constant=Raw)
    volatile = VOLATILE_KEYS.union(*(keys for rx, keys in VOLATILE_KEYS_AT if re.fullmatch(rx, path)))
    return _dump(tree, "", volatile, port) + "\n"


def _dump(v, indent: str, volatile: frozenset, port: int | None) -> str:
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, str):
        return json.dumps(normalize_text(v, port), ensure_ascii=False)
    if isinstance(v, list):
        if not v:
            return "[]"
        inner = indent + " "
        return "[\n" + ",\n".join(inner + _dump(x, inner, volatile, port) for x in v) + "\n" + indent + "]"
    if isinstance(v, dict):
        if not v:
            return "{}"
        inner = indent + " "
        items = [inner + json.dumps(k, ensure_ascii=False) + ": "
                 + ('"<volatile>"' if k in volatile else _dump(v[k], inner, volatile, port)) for k in sorted(v)]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    return json.dumps(v)  # true, false, null


def normalize_body(body: bytes, content_type: str, path: str, port: int | None) -> tuple[str, str]:
    """(kind, text): kind json, html or text; the text as stored and compared."""
    text = body.decode("utf-8", errors="replace")
    if "json" in content_type:
        try:
            return "json", canonical_json(text, path, port)
        except ValueError:
            pass
    return ("html" if "html" in content_type else "text"), normalize_text(text, port)


# ---------------------------------------------------------------- moves

def _compiled() -> list[tuple[re.Pattern, re.Pattern, str]]:
    return [(re.compile(old), re.compile(rf"(?<![\w.\-])(?P<origin>https?://[^/\"'\s<>]+)?{old}(?![^?#\"'\s<>&])"),
             new) for old, new in MOVES]


def moved(url: str) -> str | None:
    """The new URL of an old one (query carried over), or None if it did not move."""
    parts = urlsplit(url)
    for exact, _, new in _compiled():
        m = exact.fullmatch(parts.path)
        if m:
            return new.format(**m.groupdict()) + (f"?{parts.query}" if parts.query else "")
    return None


def rewrite_links(text: str) -> str:
    """Every old URL in a page (absolute or not) written as its new one, the query left as it is."""
    for _, embedded, new in _compiled():
        text = embedded.sub(lambda m, new=new: (m["origin"] or "") + new.format(
            **{k: v for k, v in m.groupdict().items() if k != "origin"}), text)
    return text


def _location(value: str | None, port: int) -> str | None:
    return None if value is None else normalize_text(value, port).removeprefix(ORIGIN)


# ---------------------------------------------------------------- take

class Taker:
    def __init__(self, port: int, out: Path):
        self.port, self.out = port, out
        self.files: set[str] = set()
        self.paths: list[str] = []  # the training paths' ids (discover(): GET /api/processes)
        # what this app answers for a route it does not have: a new URL answering this is not served yet
        self.no_route = {prefix: self.fetch(f"{prefix}/__capture_no_such_route__")[1:] for prefix in ("", "/api")}

    def fetch(self, url: str, method: str = "GET") -> tuple[int, dict, bytes]:
        for _ in range(4):  # a full compute queue (503 + Retry-After) is load, not an answer: ask again
            status, headers, body = get(self.port, url, {"Accept-Encoding": "identity"}, timeout=600, method=method)
            if status != 503 or "retry-after" not in headers or urlsplit(url).path == "/readyz":
                break
            time.sleep(min(5, int(headers["retry-after"])))
        return status, headers, body

    def record(self, url: str, method: str = "GET") -> dict:
        status, headers, body = self.fetch(url, method)
        path = urlsplit(url).path
        content_type = headers.get("content-type", "")
        kind, text = normalize_body(body, content_type, path, self.port)
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{method}{url}")[:100]
        name = f"{name}.{hashlib.sha256(f'{method} {url}'.encode()).hexdigest()[:8]}.{kind}"
        if name not in self.files:
            (self.out / name).write_text(text, encoding="utf-8")
            self.files.add(name)
        return {"url": url, "method": method, "status": status, "content_type": content_type,
                "location": _location(headers.get("location"), self.port), "file": name, "kind": kind,
                "served": not self.no_such_route(status, headers, body)}

    def no_such_route(self, status: int, headers: dict, body: bytes) -> bool:
        return status == 404 and any(headers.get("content-type") == h.get("content-type") and body == b
                                     for h, b in self.no_route.values())

    def is_kind(self, probe: str) -> bool:
        """Whether the walkthrough is of the kind whose step JSON `probe` is: 409 says it is not."""
        status, headers, body = self.fetch(probe)
        return status != 409 and not self.no_such_route(status, headers, body)

    def entry(self, url: str, method: str = "GET") -> dict:
        item = self.record(url, method)
        new = moved(url) if method == "GET" else None
        if new is not None:  # the old URL as it answers (not followed), and the new one if the app has it
            item["moved_to"] = new
            item["new"] = self.record(new)
        return item


def _walkthrough_urls(taker: Taker, wid: str) -> list[str]:
    status, _, body = taker.fetch(f"/api/walkthroughs/{wid}")
    if status != 200:
        return [f"/walkthroughs/{wid}", f"/api/walkthroughs/{wid}"]
    doc = json.loads(body)
    steps = [s["id"] for s in doc.get("steps", [])]
    opening = doc.get("opening_step") or (steps[0] if steps else "")
    chosen = next((s.get("selected") for s in doc.get("steps", []) if s["id"] == opening), None) or []
    node = chosen[0] if chosen else (doc.get("nodes") or [{"id": ""}])[0]["id"]
    values = {"id": wid, "opening": opening, "node": node}
    kinds = [k for k, probe in KIND_PROBES.items() if taker.is_kind(probe.format(id=wid))]
    templates = list(WALKTHROUGH_URLS)
    for kind in kinds:
        templates += [KIND_PROBES[kind], *KIND_URLS[kind], PATHS_URL]
    urls: list[str] = []
    for template in templates:
        for step in (steps if "{step}" in template else [""]):
            for path in (taker.paths if "{path}" in template else [""]):
                urls.append(template.format(**values, step=step, path=path))
    return list(dict.fromkeys(urls))


def discover(taker: Taker) -> tuple[list[str], list[str]]:
    """(the URLs to GET, the run's URLs): asked of the running app. Opens the shipped TRL run (one POST)."""
    taker.paths = [p["id"] for p in json.loads(taker.fetch("/api/processes")[2])["processes"]]
    walkthroughs = [w["id"] for w in json.loads(taker.fetch("/api/walkthroughs")[2])]
    status, _, body = taker.fetch(RUN_EXAMPLE, "POST")
    run_urls: list[str] = []
    if status in (200, 201):
        run = json.loads(body)["id"]
        run_urls = [u.format(run=run) for u in RUN_URLS]
        recorded = json.loads(taker.fetch(f"/api/runs/{run}")[2]).get("recorded", [])
        walkthroughs += [r["walkthrough"] for r in recorded if r.get("walkthrough")]
    urls = list(URLS)
    for wid in dict.fromkeys(walkthroughs):
        urls += _walkthrough_urls(taker, wid)
    return list(dict.fromkeys(urls)), run_urls


def app_location(python: str, repo: Path, env: dict) -> str:
    """Where the started app's package comes from (a check that --repo's app, not an installed one, runs)."""
    done = subprocess.run([python, "-c", "import app; print(app.__file__)"], cwd=repo, env=env,
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def take(out: Path, repo: Path, device: str) -> int:
    if out.is_dir() and any(out.iterdir()):
        if not (out / "index.json").is_file():
            print(f"error: {out} is not empty and holds no capture: choose another OUT_DIR", file=sys.stderr)
            return 2
        # a capture is one take: an earlier take's files would mislead a diff (only those are removed)
        earlier = json.loads((out / "index.json").read_text(encoding="utf-8"))["entries"]
        for name in {e["file"] for e in earlier} | {e["new"]["file"] for e in earlier if "new" in e} | {
                "index.json", "server.log"}:
            (out / name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="capture-data-") as data:
        env = {"DATA_DIR": data, "DEFAULT_RUNS": "false", "PYTHONPATH": str(repo), "DATABASE_URL": None,
               "UPLOADS_DIR": None, "GGUF_MODELS": None, "RESPONSE_CACHE_MB": None, "WARM_UP": None}
        merged = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
        location = app_location(sys.executable, repo, merged)
        print(f"[capture] app from {location}; DATA_DIR {data}", file=sys.stderr, flush=True)
        with server(sys.executable, device, "warning", out / "server.log", env, cwd=repo) as (port, proc):
            wait_healthy(proc, port, 300, "/readyz")
            ready_s = time.monotonic() - started
            taker = Taker(port, out)
            urls, run_urls = discover(taker)
            entries = [taker.entry(u) for u in urls]
            entries.append(taker.entry(RUN_EXAMPLE, "POST"))  # the run is open already: 201, the same id
            entries += [taker.entry(u) for u in run_urls]
    seconds = time.monotonic() - started
    index = {"repo": str(repo), "app": location, "device": device, "seconds": round(seconds, 1),
             "ready_seconds": round(ready_s, 1), "count": len(entries), "entries": entries}
    (out / "index.json").write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    print(f"[capture] {len(entries)} URLs ({sum('new' in e for e in entries)} moved, with their new URLs) "
          f"in {seconds:.0f} s ({ready_s:.0f} s to /readyz) -> {out}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------- compare

def _load(folder: Path) -> tuple[list[dict], dict[str, dict]]:
    """(the entries in order, every answer by "METHOD URL": the captured URLs' and their new URLs')."""
    entries = json.loads((folder / "index.json").read_text(encoding="utf-8"))["entries"]
    by_url: dict[str, dict] = {}
    for e in entries:
        by_url.setdefault(f"{e['method']} {e['url']}", e)
        if "new" in e:
            by_url.setdefault(f"GET {e['new']['url']}", e["new"])
    return entries, by_url


def _body(folder: Path, answer: dict) -> str:
    return (folder / answer["file"]).read_text(encoding="utf-8")


def _diff(a: str, b: str, label: str, cap: int) -> list[str]:
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), f"before {label}", f"after {label}",
                                      n=2, lineterm=""))
    return lines[:cap] + ([f"... ({len(lines) - cap} more diff lines)"] if len(lines) > cap else [])


def compare(before: Path, after: Path, diff_lines: int = 30, max_diffs: int = 20, use_moves: bool = True) -> int:
    """Every URL of BEFORE against AFTER (through MOVES unless `use_moves` is False: two takes of the same code);
    prints the table and the first diffs; 1 if anything differs or is missing."""
    b_entries, b_index = _load(before)
    _, a_index = _load(after)
    rows, diffs = [], []
    for b in b_entries:
        key = f"{b['method']} {b['url']}"
        new = moved(b["url"]) if b["method"] == "GET" and use_moves else None
        # BEFORE itself may have been taken half-way (the old URL redirecting already): its answer is the new URL's
        was = b
        if b["status"] in REDIRECTS and new and b.get("location") == new and b.get("new", {}).get("served"):
            was = b["new"]
        problems: list[str] = []
        old_after = a_index.get(key)
        if old_after is None:
            rows.append((key, was["status"], "-", "MISSING in after"))
            continue
        if new is not None:
            if old_after["status"] != 308 or old_after.get("location") != new:
                problems.append(f"old URL answered {old_after['status']} Location {old_after.get('location')!r}, "
                                f"expected 308 {new!r}")
            now = a_index.get(f"GET {new}")
            if now is None or not now.get("served", True):
                rows.append((key, was["status"], "-", f"MISSING new URL {new}"))
                continue
        else:
            now = old_after
        for field in ("status", "content_type"):
            if was[field] != now[field]:
                problems.append(f"{field}: {was[field]!r} -> {now[field]!r}")
        expected_location = was.get("location")
        if expected_location is not None:
            expected_location = (moved(expected_location) or rewrite_links(expected_location)) if use_moves \
                else expected_location
        if now is old_after and new is None and expected_location != now.get("location"):
            problems.append(f"location: {expected_location!r} -> {now.get('location')!r}")
        b_text, a_text = _body(before, was), _body(after, now)
        if was["kind"] in ("html", "json") and use_moves:  # a page's links, a JSON answer's `start` naming a POST
            b_text = rewrite_links(b_text)
        if b_text != a_text:
            problems.append("body differs")
            if len(diffs) < max_diffs:
                diffs.append((key, _diff(b_text, a_text, b["url"], diff_lines)))
        label = "same" if not problems else "DIFFERENT: " + "; ".join(problems)
        shown = f"{now['status']}" + (f" (old: {old_after['status']})" if new is not None else "")
        rows.append((key + (f"  -> {new}" if new else ""), was["status"], shown, label))
    width = min(110, max(len(r[0]) for r in rows))
    print(f"{'URL':<{width}}  {'before':>6}  {'after':<14}  result")
    for url, b_status, a_status, label in rows:
        print(f"{url:<{width}}  {b_status!s:>6}  {a_status!s:<14}  {label}")
    bad = [r for r in rows if r[3] != "same"]
    extra = sorted(set(a_index) - set(b_index))
    for key, lines in diffs:
        print(f"\n--- {key}")
        print("\n".join(lines))
    print(f"\n{len(rows)} URLs compared: {len(rows) - len(bad)} same, {len(bad)} different or missing"
          + (f"; {len(extra)} URLs only in after (not compared)" if extra else ""))
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.capture", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("take", help="start the app of a checkout and capture every URL into OUT_DIR")
    t.add_argument("out", type=Path, metavar="OUT_DIR")
    t.add_argument("--repo", type=Path, default=ROOT, help="the checkout whose app is started (default: this one)")
    t.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    c = sub.add_parser("compare", help="compare two captures; exit 1 if anything differs")
    c.add_argument("before", type=Path, metavar="BEFORE_DIR")
    c.add_argument("after", type=Path, metavar="AFTER_DIR")
    c.add_argument("--diff-lines", type=int, default=30, help="diff lines shown per different URL")
    c.add_argument("--max-diffs", type=int, default=20, help="different URLs whose diff is shown")
    c.add_argument("--no-moves", action="store_true",
                   help="ignore MOVES: every URL against itself (two takes of the same code: proves the normalization)")
    args = parser.parse_args(argv)
    if args.command == "take":
        return take(args.out.resolve(), args.repo.resolve(), args.device)
    return compare(args.before, args.after, args.diff_lines, args.max_diffs, not args.no_moves)


if __name__ == "__main__":
    raise SystemExit(main())
