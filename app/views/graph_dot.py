"""Graph layout by Graphviz `dot` (docs/design.md §2, "Graph layout").

Every layout the app draws (the overview, each step, any set of open modules) is one `dot`
run: a layered (Sugiyama) layout with routed splines. Open modules are dot clusters
(`subgraph cluster_<n>`), so an edge never runs through a box that is neither its end nor a
module holding an end; a cluster's header (its name, id line, shape and ±) is a node of its own
on the cluster's top row, so no edge runs through that text either. An edge to an open container enters its
cluster (`lhead`/`ltail`, `compound=true`) at a member that stands for it.

dot works in points with y up; the world is y down, one world unit a point. A layout is a
pure function of the dot source, so results are cached (the dot text, and the whole layout on
its inputs): a page never runs `dot` twice for the same view. The Python side is the PyPI
wrapper `graphviz` (0.21, MIT); the `dot` binary is Debian's package `graphviz`.
"""
from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import graphviz  # type: ignore[import-untyped]  # no stubs; a thin wrapper over the dot program

from app.views.graph_detour import detour
from app.views.numbers import coordinate as fmt

Box = tuple[float, float, float, float]  # x, y, width, height (world: y down)

INSTALL_HINT = ("Graphviz's `dot` program is missing: the graph layout needs it. Install Debian's package "
                "`graphviz` (apt-get install graphviz; `make run` and `make test` do it), or put `dot` on PATH.")

# Graph attributes: top to bottom, as the seed's six layers read best on a phone and a laptop.
RANKDIR = "TB"
NODESEP_IN = 0.4     # between boxes of one rank (inches: 29 world units)
RANKSEP_IN = 0.75    # between ranks: room for the arrowheads and a note above a box (the rewards)
COMPACT_RANKSEP_IN = 0.5   # the overview's: the whole model fits a 1920 x 1080 frame at readable zoom
CLUSTER_MARGIN = 14  # points between an open module's frame and its members


class GraphvizMissing(RuntimeError):
    """`dot` is not installed: the app cannot lay out a graph and says so at start-up."""


def require_dot() -> str:
    path = shutil.which("dot")
    if path is None:
        raise GraphvizMissing(INSTALL_HINT)
    return path


@dataclass(frozen=True)
class LayoutNode:
    id: str
    width: float
    height: float
    parent: str | None        # the open container it is drawn in (None: the top level)


@dataclass(frozen=True)
class LayoutCluster:
    id: str                   # an open module, drawn around its members
    parent: str | None
    header_width: float       # the room its header needs above its members
    header_height: float


@dataclass(frozen=True)
class Layout:
    boxes: dict[str, Box]                 # every node and cluster, absolute world boxes
    headers: dict[str, Box]               # each open module's header (name, id, shape, ±), inside its box
    paths: dict[tuple[str, str], str]     # SVG path data per drawn edge (source, target)
    width: float
    height: float
    seconds: float                        # what dot took (0 when cached)


STATS = {"runs": 0, "hits": 0, "seconds": 0.0}
_lock = threading.Lock()


def _points(text: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in (p.split(",")[:2] for p in text.split())]


def _spline_path(pos: str, height: float) -> str:
    """All of an edge's splines (concentrated edges have several, separated by ';')."""
    return " ".join(p for p in (_one_spline(part, height) for part in pos.split(";")) if p)


def _one_spline(pos: str, height: float) -> str:
    """dot's edge `pos` ("e,x,y s,x,y p0 p1 p2 p3 ...": cubic B-spline pieces, shared ends, then
    the arrow tip) as SVG path data, y flipped. The path ends at the arrow's tip, where our
    marker's tip sits (refX 10)."""
    start = end = None
    rest: list[str] = []
    for part in pos.split():
        if part.startswith("e,"):
            end = part[2:]
        elif part.startswith("s,"):
            start = part[2:]
        else:
            rest.append(part)
    pts = [(x, height - y) for x, y in _points(" ".join(rest))]
    if not pts:
        return ""
    out = []
    if start is not None:
        (sx, sy), = _points(start)
        out.append(f"M{fmt(sx)} {fmt(height - sy)} L{fmt(pts[0][0])} {fmt(pts[0][1])}")
    else:
        out.append(f"M{fmt(pts[0][0])} {fmt(pts[0][1])}")
    for i in range(1, len(pts) - 2, 3):
        (x1, y1), (x2, y2), (x3, y3) = pts[i:i + 3]
        out.append(f"C{fmt(x1)} {fmt(y1)} {fmt(x2)} {fmt(y2)} {fmt(x3)} {fmt(y3)}")
    if end is not None:
        (ex, ey), = _points(end)
        out.append(f"L{fmt(ex)} {fmt(height - ey)}")
    return " ".join(out)


def _source(nodes: Sequence[LayoutNode], clusters: Sequence[LayoutCluster], edges: Sequence[tuple[str, str]],
            ranksep: float = RANKSEP_IN) -> tuple[str, dict[str, str], dict[str, str]]:
    """The dot text, dot's names for our nodes (n0, n1, ... in file order) and for clusters."""
    names = {n.id: f"n{i}" for i, n in enumerate(nodes)}
    cluster_names = {c.id: f"cluster_{i}" for i, c in enumerate(clusters)}
    graph = graphviz.Digraph("G", graph_attr={
        "rankdir": RANKDIR, "nodesep": str(NODESEP_IN), "ranksep": str(ranksep), "compound": "true",
        "newrank": "true",  # ranks across clusters: fewer edges cut through an unrelated module
        "splines": "true", "margin": "0", "outputorder": "edgesfirst", "ordering": "out"},
        node_attr={"shape": "box", "fixedsize": "true", "label": "", "margin": "0"},
        edge_attr={"arrowsize": "0.7"})
    inside: dict[str | None, list[LayoutNode]] = {}
    for n in nodes:
        inside.setdefault(n.parent, []).append(n)
    sub: dict[str | None, list[LayoutCluster]] = {}
    for c in clusters:
        sub.setdefault(c.parent, []).append(c)

    def fill(g: graphviz.Digraph, parent: str | None) -> None:
        for n in inside.get(parent, []):
            g.node(names[n.id], width=f"{n.width / 72:.4f}", height=f"{n.height / 72:.4f}")
        for c in sub.get(parent, []):
            with g.subgraph(name=cluster_names[c.id]) as s:
                s.attr(label="", margin=str(CLUSTER_MARGIN))
                s.node(f"h{cluster_index[c.id]}", width=f"{c.header_width / 72:.4f}",
                       height=f"{c.header_height / 72:.4f}")
                fill(s, c.id)

    cluster_index = {c.id: i for i, c in enumerate(clusters)}
    fill(graph, None)
    # An edge to an open container enters its cluster at a member standing for it.
    first_leaf: dict[str, str] = {}
    parents = {c.id: c.parent for c in clusters} | {n.id: n.parent for n in nodes}
    for n in nodes:
        up = n.parent
        while up is not None:
            first_leaf.setdefault(up, n.id)
            up = parents[up]
    # The header sits on the top row of its module: an invisible edge to each of its members.
    for c in clusters:
        for n in inside.get(c.id, []):
            graph.edge(f"h{cluster_index[c.id]}", names[n.id], style="invis")
        for child in sub.get(c.id, []):
            graph.edge(f"h{cluster_index[c.id]}", f"h{cluster_index[child.id]}", style="invis")
    for i, (s, t) in enumerate(edges):
        attrs = {"id": f"e{i}"}
        if s in cluster_names:
            attrs["ltail"] = cluster_names[s]
        if t in cluster_names:
            attrs["lhead"] = cluster_names[t]
        graph.edge(names[first_leaf.get(s, s)], names[first_leaf.get(t, t)], **attrs)
    return graph.source, names, cluster_names


@lru_cache(maxsize=512)
def _run_dot(source: str) -> tuple[str, float]:
    started = time.perf_counter()
    try:
        out = graphviz.pipe("dot", "json", source.encode(), quiet=True)
    except graphviz.ExecutableNotFound as exc:
        raise GraphvizMissing(INSTALL_HINT) from exc
    seconds = time.perf_counter() - started
    with _lock:
        STATS["runs"] += 1
        STATS["seconds"] += seconds
    return out.decode(), seconds


def dot_layout(nodes: Sequence[LayoutNode], clusters: Sequence[LayoutCluster],
               edges: Sequence[tuple[str, str]], *, compact: bool = False) -> Layout:
    """Boxes for every node and open container, and a routed path for every edge. The whole
    result is cached on its inputs (a page asks for the same view more than once)."""
    key = (tuple(nodes), tuple(clusters), tuple(edges), COMPACT_RANKSEP_IN if compact else RANKSEP_IN)
    before = _layout.cache_info().hits
    laid = _layout(*key)
    if _layout.cache_info().hits > before:
        with _lock:
            STATS["hits"] += 1
        return Layout(laid.boxes, laid.headers, laid.paths, laid.width, laid.height, 0.0)
    return laid


@lru_cache(maxsize=512)
def _layout(nodes: tuple[LayoutNode, ...], clusters: tuple[LayoutCluster, ...],
            edges: tuple[tuple[str, str], ...], ranksep: float) -> Layout:
    if not nodes:
        return Layout({}, {}, {}, 0.0, 0.0, 0.0)
    source, names, cluster_names = _source(nodes, clusters, edges, ranksep)
    text, seconds = _run_dot(source)
    data = json.loads(text)
    _, _, width, height = (float(v) for v in data["bb"].split(","))
    by_name = {v: k for k, v in {**names, **cluster_names}.items()}
    header_of = {f"h{i}": c.id for i, c in enumerate(clusters)}
    boxes: dict[str, Box] = {}
    headers: dict[str, Box] = {}
    objects = data.get("objects", [])
    for obj in objects:
        name = obj.get("name", "")
        if name in header_of:
            (cx, cy), = _points(obj["pos"])
            w, h = float(obj["width"]) * 72, float(obj["height"]) * 72
            headers[header_of[name]] = (round(cx - w / 2, 2), round(height - cy - h / 2, 2), round(w, 2), round(h, 2))
            continue
        nid = by_name.get(name)
        if nid is None:
            continue
        if "bb" in obj:  # a cluster
            x0, y0, x1, y1 = (float(v) for v in obj["bb"].split(","))
            boxes[nid] = (round(x0, 2), round(height - y1, 2), round(x1 - x0, 2), round(y1 - y0, 2))
        else:
            (cx, cy), = _points(obj["pos"])
            w, h = float(obj["width"]) * 72, float(obj["height"]) * 72
            boxes[nid] = (round(cx - w / 2, 2), round(height - cy - h / 2, 2), round(w, 2), round(h, 2))
    parents = {n.id: n.parent for n in nodes} | {c.id: c.parent for c in clusters}
    paths: dict[tuple[str, str], str] = {}
    for e in data.get("edges", []):
        if not str(e.get("id", "")).startswith("e"):
            continue  # a header's invisible edge
        i = int(e["id"][1:])
        s, t = edges[i]
        ends = set(_chain(parents, s)) | set(_chain(parents, t))
        # An open module's header is a node of its own: no edge's end, so every edge keeps out of it.
        obstacles = [b for nid, b in boxes.items() if nid not in ends] + list(headers.values())
        paths[edges[i]] = detour(_spline_path(e.get("pos", ""), height), obstacles)
    return Layout(boxes, headers, paths, width, height, seconds)


def _chain(parents: Mapping[str, str | None], node_id: str) -> list[str]:
    out: list[str] = []
    current: str | None = node_id
    while current is not None and current not in out:
        out.append(current)
        current = parents.get(current)
    return out


def cache_clear() -> None:
    _layout.cache_clear()
    _run_dot.cache_clear()


def stats() -> Mapping[str, float]:
    return dict(STATS)


# At import, so `python -m app` (and any worker) stops at start-up with the message above,
# naming the package, rather than serving pages whose graphs cannot be drawn.
require_dot()
