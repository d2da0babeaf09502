"""The `tensorviz.graph` export format (version 3, schemaVersion 2): models, parsing, checks.

`models` holds the typed fields, `references` the cross-reference checks,
`limits` the size bounds, `parsing` the entry points. See docs/design.md §2.
"""
from app.domain.snapshot.limits import MAX_DEPTH, MAX_ITEMS, text_depth, value_depth
from app.domain.snapshot.models import (
           Anchor,
           AnchorContext,
           Camera,
           Connection,
           Edge,
           Node,
           Position,
           Snapshot,
           Step,
           Viewport,
)
from app.domain.snapshot.parsing import SnapshotError, load_snapshot, parse_snapshot

__all__ = ["MAX_DEPTH", "MAX_ITEMS", "Anchor", "AnchorContext", "Camera", "Connection", "Edge", "Node",
           "Position", "Snapshot", "SnapshotError", "Step", "Viewport", "load_snapshot", "parse_snapshot",
           "text_depth", "value_depth"]
