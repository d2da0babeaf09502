"""Where a graph view's camera goes without script (docs/design.md §2, "Graph layout"): the
same rule as static/js/camera.js, so a page without JavaScript frames the same nodes. A
camera is screen = world * z + (x, y); pure arithmetic on boxes (x, y, width, height)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.views.graph_layout import PADDING
from app.views.numbers import coordinate as fmt

STEP_ZOOM = 1.25        # the closest a fitted camera comes (the seed's cameras' zoom)
READABLE_ZOOM = 1.0     # the farthest: node detail text is 11 world units, so 11 px on screen


@dataclass(frozen=True)
class Camera:
    """screen = world * z + (x, y), as the export's React-Flow-style cameras."""
    x: float
    y: float
    z: float

    def transform(self) -> str:
        return f"translate({fmt(self.x)} {fmt(self.y)}) scale({fmt(self.z)})"


def _union(boxes: Iterable[tuple[float, float, float, float]]) -> tuple[float, float, float, float] | None:
    boxes = list(boxes)
    if not boxes:
        return None
    x0, y0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
    x1, y1 = max(b[0] + b[2] for b in boxes), max(b[1] + b[3] for b in boxes)
    return x0, y0, x1 - x0, y1 - y0


def fit_camera(need: Sequence[tuple[float, float, float, float]], context: Sequence[tuple[float, float, float, float]],
               frame: tuple[float, float], margin: float = PADDING) -> Camera:
    """The camera rule of static/js/camera.js (`GRPOCamera.fit`), for the page without script:
    the context (the step's nodes and their neighbours) centred at the largest zoom up to
    STEP_ZOOM that holds it; where it only fits farther out than READABLE_ZOOM, zoom
    READABLE_ZOOM, centred on the context, moved the least that keeps the needed boxes whole
    (their top-left when even they do not fit)."""
    fw, fh = frame
    ctx = _union(context) or _union(need)
    if ctx is None:
        return Camera(0.0, 0.0, 1.0)
    room_w, room_h = max(fw - 2 * margin, 1.0), max(fh - 2 * margin, 1.0)
    z = min(STEP_ZOOM, room_w / max(ctx[2], 1.0), room_h / max(ctx[3], 1.0))
    z = max(z, READABLE_ZOOM)
    x = fw / 2 - (ctx[0] + ctx[2] / 2) * z
    y = fh / 2 - (ctx[1] + ctx[3] / 2) * z
    box = _union(need)
    if box is not None:
        x += _shift(box[0] * z + x, (box[0] + box[2]) * z + x, margin, fw - margin)
        y += _shift(box[1] * z + y, (box[1] + box[3]) * z + y, margin, fh - margin)
    return Camera(round(x, 2), round(y, 2), round(z, 4))


Box = tuple[float, float, float, float]


def with_holders(need: Sequence[Box], holders: Sequence[Box], frame: tuple[float, float],
                 margin: float = PADDING) -> list[Box]:
    """The boxes the camera must show whole: the step's own, and the open modules holding them when
    all of them fit the frame even at STEP_ZOOM (a member selected inside its module shows in its
    frame; a module too large for the frame, the policy's thirty blocks, leaves the member alone)."""
    both = _union([*need, *holders])
    if not holders or both is None:
        return list(need)
    fw, fh = frame
    fits = both[2] * STEP_ZOOM <= fw - 2 * margin and both[3] * STEP_ZOOM <= fh - 2 * margin
    return [*need, *holders] if fits else list(need)


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
