"""Keeping dot's edges out of unrelated boxes (docs/design.md §2, "Graph layout"): a spline
piece that cuts the corner of a box it neither starts nor ends in is bent round that corner.
Pure geometry on SVG path data, in world units (y down)."""
from __future__ import annotations

from collections.abc import Sequence

from app.views.numbers import coordinate as fmt

Box = tuple[float, float, float, float]  # x, y, width, height
DETOUR_GAP = 14.0   # how far outside a box's corner a detour passes (world units)
Point = tuple[float, float]


def _cubic(p0: Point, p1: Point, p2: Point, p3: Point, t: float) -> Point:
    u = 1 - t
    return (u ** 3 * p0[0] + 3 * u * u * t * p1[0] + 3 * u * t * t * p2[0] + t ** 3 * p3[0],
            u ** 3 * p0[1] + 3 * u * u * t * p1[1] + 3 * u * t * t * p2[1] + t ** 3 * p3[1])


def _inside(p: Point, box: Box, inset: float = 0.5) -> bool:
    x, y, w, h = box
    return x + inset < p[0] < x + w - inset and y + inset < p[1] < y + h - inset


def _hit(seg: tuple[Point, Point, Point, Point], obstacles: Sequence[Box]) -> tuple[Box, list[Point]] | None:
    pts = [_cubic(*seg, k / 48) for k in range(1, 48)]
    for box in obstacles:
        inside = [p for p in pts if _inside(p, box)]
        if inside:
            return box, inside
    return None


def _split_at_corner(seg: tuple[Point, Point, Point, Point], box: Box,
                     inside: list[Point]) -> list[tuple[Point, Point, Point, Point]]:
    """The piece of spline that cuts through ``box``, as two through the box's nearest corner
    (just outside it), keeping the spline's direction at both ends."""
    p0, p1, p2, p3 = seg
    x, y, w, h = box
    mx, my = sum(p[0] for p in inside) / len(inside), sum(p[1] for p in inside) / len(inside)
    cx, cy = x + w / 2, y + h / 2
    corner = (x + w + DETOUR_GAP if mx >= cx else x - DETOUR_GAP, y + h + DETOUR_GAP if my >= cy else y - DETOUR_GAP)
    dx, dy = (p3[0] - p0[0]) / 4, (p3[1] - p0[1]) / 4
    return [(p0, ((p0[0] + p1[0]) / 2, (p0[1] + p1[1]) / 2), (corner[0] - dx, corner[1] - dy), corner),
            (corner, (corner[0] + dx, corner[1] + dy), ((p3[0] + p2[0]) / 2, (p3[1] + p2[1]) / 2), p3)]


def detour(path: str, obstacles: Sequence[Box]) -> str:
    """dot routes an edge around the boxes of its own rank, but a spline joining two ranks can
    cut the corner of an open module it passes (a residual stream past a block):
    such a piece is bent round that corner. Pieces are re-checked four times at most."""
    if not obstacles or " C" not in path:
        return path
    out: list[str] = []
    for sub in path.split("M")[1:]:
        tokens = sub.replace("C", " C ").replace("L", " L ").split()
        start: Point = (float(tokens[0]), float(tokens[1]))
        parts: list[str] = [f"M{fmt(start[0])} {fmt(start[1])}"]
        cur, i = start, 2
        while i < len(tokens):
            if tokens[i] == "L":
                cur = (float(tokens[i + 1]), float(tokens[i + 2]))
                parts.append(f"L{fmt(cur[0])} {fmt(cur[1])}")
                i += 3
                continue
            v = [float(t) for t in tokens[i + 1:i + 7]]
            pieces = [(cur, (v[0], v[1]), (v[2], v[3]), (v[4], v[5]))]
            for _ in range(4):
                again: list[tuple[Point, Point, Point, Point]] = []
                for seg in pieces:
                    hit = _hit(seg, obstacles)
                    again.extend(_split_at_corner(seg, *hit) if hit else [seg])
                if len(again) == len(pieces):
                    break
                pieces = again
            for _, c1, c2, end in pieces:
                parts.append(f"C{fmt(c1[0])} {fmt(c1[1])} {fmt(c2[0])} {fmt(c2[1])} {fmt(end[0])} {fmt(end[1])}")
            cur, i = (v[4], v[5]), i + 7
        out.append(" ".join(parts))
    return " ".join(out)
