"""Graph view model: which nodes a view shows, given its expanded modules.

Knows the snapshot format, nothing of the web layer.
"""
from __future__ import annotations

from collections.abc import Iterable

from .snapshot import Snapshot


def ancestors(snapshot: Snapshot, node_id: str) -> list[str]:
    """Enclosing modules, innermost first (the loader has refused cycles)."""
    chain, parent = [], snapshot.node(node_id).parent_id
    while parent is not None:
        chain.append(parent)
        parent = snapshot.node(parent).parent_id
    return chain


def visible_node_ids(snapshot: Snapshot, expanded: Iterable[str]) -> list[str]:
    """Nodes drawn in a view: those whose every enclosing module is expanded, in file order."""
    open_modules = set(expanded)
    return [n.node_id for n in snapshot.nodes
            if all(a in open_modules for a in ancestors(snapshot, n.node_id))]
