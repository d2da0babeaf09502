"""Where a graph view's camera goes without script (docs/design.md §2, "Graph layout"): the
same rule as static/js/camera.js, so a page without JavaScript frames the same nodes. A
camera is screen = world * z + (x, y); pure arithmetic on boxes (x, y, width, height)."""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.views.graph_layout import PADDING
from app.views.numbers import coordinate as fmt

STEP_ZOOM = 1.25        # the closest a fitted camera comes (the seed's cameras' zoom)
READABLE_ZOOM = 1.0     # the farthest: node detail text is 11 world units, so 11 px on screen
# The room a phone's graph frame leaves inside its margins at READABLE_ZOOM (390 px wide: a 356 x 480
# frame less 21 px a side): an open module whose title cannot share it with the step's node is named in
# the frame's title strip (GraphView.far_titles), whatever the frame, so every frame names it.
PHONE_ROOM = (314.0, 438.0)
EDGE = 18.0             # the least room a needed box keeps from the frame's edge (app.js's reveal pans closer than 16)
SLACK = 2.0             # a box is wholly in (or out) with its outline: 2 px clear of the frame's edge

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Camera:
    """screen = world * z + (x, y), as the export's React-Flow-style cameras."""
    x: float
    y: float
    z: float

    def transform(self) -> str:
        return f"translate({fmt(self.x)} {fmt(self.y)}) scale({fmt(self.z)})"


def _union(boxes: Iterable[Box]) -> Box | None:
    boxes = list(boxes)
    if not boxes:
        return None
    x0, y0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
    x1, y1 = max(b[0] + b[2] for b in boxes), max(b[1] + b[3] for b in boxes)
    return x0, y0, x1 - x0, y1 - y0


def fits(boxes: Sequence[Box], room: tuple[float, float], zoom: float = READABLE_ZOOM) -> bool:
    """The boxes, together, fit `room` (screen px) at `zoom`."""
    box = _union(boxes)
    return box is None or (box[2] * zoom <= room[0] + 1e-9 and box[3] * zoom <= room[1] + 1e-9)


def fit_camera(need: Sequence[Box], context: Sequence[Box], frame: tuple[float, float], margin: float = PADDING,
               *, wanted: Sequence[Box] = (), avoid: Sequence[Box] = ()) -> Camera:
    """The camera rule of static/js/camera.js (`GRPOCamera.fit`), for the page without script:
    1. `wanted` boxes (in order: the innermost open module holding the step's node, its title then all
       of it, then the next one out) join the needed ones while all of them still fit the frame at
       READABLE_ZOOM;
    2. the context (the step's nodes and their neighbours) centred at the largest zoom up to
       STEP_ZOOM that holds it, never farther out than READABLE_ZOOM, nor so close that the needed
       boxes no longer fit;
    3. moved the least that keeps the needed boxes whole (their top-left when even they do not fit);
    4. then, keeping the needed boxes whole (EDGE px clear of the frame's edge) and a context that was
       whole whole, moved the least (zooming out towards READABLE_ZOOM if that is what it takes) so that
       the frame's edge cuts no `avoid` box (a node, an open module's title, a note): each is wholly in
       or wholly out (the fewest cut where no camera leaves all whole)."""
    fw, fh = frame
    room = (max(fw - 2 * margin, 1.0), max(fh - 2 * margin, 1.0))
    need = list(need)
    for box in wanted:
        if fits([*need, box], room):
            need.append(box)
    ctx = _union(context) or _union(need)
    if ctx is None:
        return Camera(0.0, 0.0, 1.0)
    z0 = min(STEP_ZOOM, room[0] / max(ctx[2], 1.0), room[1] / max(ctx[3], 1.0))
    nbox = _union(need)
    if nbox is not None:
        z0 = min(z0, room[0] / max(nbox[2], 1.0), room[1] / max(nbox[3], 1.0))
    z0 = max(z0, READABLE_ZOOM)
    best: tuple[int, float, float, float] | None = None   # cuts, x, y, z
    # at the fitted zoom first, then others; the context kept whole where it was first, then not
    for keep, z in [(keep, z) for keep in (ctx, None) for z in (_zooms(z0) if avoid else [z0])]:
        x = fw / 2 - (ctx[0] + ctx[2] / 2) * z
        y = fh / 2 - (ctx[1] + ctx[3] / 2) * z
        if nbox is not None:
            x += _shift(nbox[0] * z + x, (nbox[0] + nbox[2]) * z + x, margin, fw - margin)
            y += _shift(nbox[1] * z + y, (nbox[1] + nbox[3]) * z + y, margin, fh - margin)
        cuts = 0
        if avoid:
            cuts, x, y = _uncut(x, y, z, frame, min(margin, EDGE), nbox, keep, avoid)
        if best is None or cuts < best[0]:
            best = (cuts, x, y, z)
        if cuts == 0 or not avoid:
            break
    assert best is not None
    return Camera(round(best[1], 2), round(best[2], 2), round(best[3], 4))


def cut_by(camera: Camera, frame: tuple[float, float], boxes: Sequence[Box]) -> list[int]:
    """The indices of the boxes that `camera` leaves across the frame's edge (neither wholly in nor out)."""
    fw, fh = frame
    out = []
    for i, b in enumerate(boxes):
        left, top = b[0] * camera.z + camera.x, b[1] * camera.z + camera.y
        right, bottom = (b[0] + b[2]) * camera.z + camera.x, (b[1] + b[3]) * camera.z + camera.y
        outside = right <= -SLACK or left >= fw + SLACK or bottom <= -SLACK or top >= fh + SLACK
        if not outside and (left < SLACK or right > fw - SLACK or top < SLACK or bottom > fh - SLACK):
            out.append(i)
    return out


def _zooms(z0: float) -> list[float]:
    """The fitted zoom, then a few steps out to READABLE_ZOOM and in to STEP_ZOOM: where no position
    leaves every box whole at z0, another zoom often does (a phone's frame is one box and two gaps wide)."""
    out = [z0, *(z0 - (z0 - READABLE_ZOOM) * k / 4 for k in range(1, 5))]
    out += [z0 + (STEP_ZOOM - z0) * k / 5 for k in range(1, 6)]
    return list(dict.fromkeys(round(z, 4) for z in out))


def _allowed(at: float, z: float, size: float, margin: float, need: Box | None, ctx: Box | None,
             axis: int) -> tuple[float, float]:
    """The translations along one axis that keep the needed boxes inside the margins, and the context
    too where `at` (the fitted translation) already has it inside; (at, at) when the needed boxes
    overflow the frame (their start is pinned)."""
    lo_t, hi_t = -math.inf, math.inf
    for box, must in ((need, True), (ctx, False)):
        if box is None:
            continue
        low, high = margin - box[axis] * z, size - margin - (box[axis] + box[axis + 2]) * z
        if low > high + 1e-9:
            if must:
                return at, at
            continue
        if must or low - 1e-6 <= at <= high + 1e-6:
            lo_t, hi_t = max(lo_t, low), min(hi_t, high)
    return (min(lo_t, at), max(hi_t, at)) if lo_t <= hi_t else (at, at)


def _candidates(at: float, span: tuple[float, float], z: float, size: float, boxes: Sequence[Box],
                axis: int) -> list[float]:
    """Translations worth trying: the fitted one, the span's ends, and each box's edge just inside or
    just outside either edge of the frame."""
    lo, hi = span
    out = {at, lo, hi}
    for b in boxes:
        start, end = b[axis] * z, (b[axis] + b[axis + 2]) * z
        d = SLACK + 1
        for t in (-start + d, -end - d, size - start + d, size - end - d):
            if lo <= t <= hi:
                out.add(t)
    return sorted(out, key=lambda t: abs(t - at))


def _status(t: float, z: float, size: float, boxes: Sequence[Box], axis: int) -> tuple[int, int]:
    """Bit sets over `boxes` at translation t along one axis: (straddling the frame's edge, wholly outside)."""
    cut = out = 0
    for i, b in enumerate(boxes):
        start, end = b[axis] * z + t, (b[axis] + b[axis + 2]) * z + t
        if end <= -SLACK or start >= size + SLACK:
            out |= 1 << i
        elif start < SLACK or end > size - SLACK:
            cut |= 1 << i
    return cut, out


def _uncut(x: float, y: float, z: float, frame: tuple[float, float], margin: float, need: Box | None,
           ctx: Box | None, avoid: Sequence[Box]) -> tuple[int, float, float]:
    """(cuts, x, y): the nearest translation that leaves the fewest `avoid` boxes across the frame's edge."""
    fw, fh = frame
    xs = _allowed(x, z, fw, margin, need, ctx, 0)
    ys = _allowed(y, z, fh, margin, need, ctx, 1)
    # only boxes that some allowed camera puts across the frame's edge matter
    boxes = [b for b in avoid
             if (b[0] + b[2]) * z + xs[1] > 0 and b[0] * z + xs[0] < fw
             and (b[1] + b[3]) * z + ys[1] > 0 and b[1] * z + ys[0] < fh]
    if not boxes:
        return 0, x, y
    cx = [(t, *_status(t, z, fw, boxes, 0)) for t in _candidates(x, xs, z, fw, boxes, 0)]
    cy = [(t, *_status(t, z, fh, boxes, 1)) for t in _candidates(y, ys, z, fh, boxes, 1)]
    best: tuple[int, float, float, float] = (len(boxes) + 1, math.inf, x, y)   # cuts, distance, x, y
    for tx, xcut, xout in cx:        # nearest first: once nothing is cut, a farther camera cannot win
        if best[0] == 0 and abs(tx - x) >= best[1]:
            break
        for ty, ycut, yout in cy:
            far = math.hypot(tx - x, ty - y)
            if best[0] == 0 and far >= best[1]:
                break
            cuts = ((xcut & ~yout) | (ycut & ~xout)).bit_count()
            if (cuts, far) < best[:2]:
                best = (cuts, far, tx, ty)
    return best[0], best[2], best[3]


def with_holders(need: Sequence[Box], holders: Sequence[Box], frame: tuple[float, float],
                 margin: float = PADDING) -> list[Box]:
    """The boxes the camera must show whole: the step's own, and the open modules holding them when
    all of them fit the frame even at STEP_ZOOM (a member selected inside its module shows in its
    frame; a module too large for the frame, the policy's thirty blocks, leaves the member alone)."""
    both = _union([*need, *holders])
    if not holders or both is None:
        return list(need)
    fw, fh = frame
    whole = both[2] * STEP_ZOOM <= fw - 2 * margin and both[3] * STEP_ZOOM <= fh - 2 * margin
    return [*need, *holders] if whole else list(need)


def _shift(lo: float, hi: float, low: float, high: float) -> float:
    if hi - lo > high - low or lo < low:
        return low - lo
    return high - hi if hi > high else 0.0


def fit_all(bounds: tuple[float, float, float, float], viewport: tuple[float, float]) -> Camera:
    """Every box in the viewport, centred, never enlarged past 1:1 (the overview, no script)."""
    min_x, min_y, max_x, max_y = bounds
    vw, vh = viewport
    w, h = max(max_x - min_x, 1.0), max(max_y - min_y, 1.0)
    z = min(1.0, (vw - 2 * PADDING) / w, (vh - 2 * PADDING) / h)
    z = z if z > 0 else 1.0
    return Camera((vw - w * z) / 2 - min_x * z, (vh - h * z) / 2 - min_y * z, z)
