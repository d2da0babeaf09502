"""Typed model of a `tensorviz.graph` export (format version 3, schemaVersion 2).

Unknown fields are kept (``extra="allow"``) so a newer exporter never breaks
loading; what the app relies on is checked, and every refusal names the field
by its JSON path, e.g. ``collaboration.walkthrough.steps[2].view.camera.z``.
Nothing in a snapshot is ever executed.
"""

from __future__ import annotations

import json
import pathlib
import re
from functools import cached_property
from typing import Annotated, Any

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, FiniteFloat,
                      ValidationError, field_validator, model_validator)

FORMAT = "tensorviz.graph"
SUPPORTED_VERSIONS = {3}
SUPPORTED_SCHEMA_VERSIONS = {2}
NODE_KINDS = ("input", "output", "module", "layer")


class SnapshotError(ValueError):
    """A refused snapshot; ``path`` is the JSON path of the first problem."""

    def __init__(self, source: str, path: str, message: str,
                 errors: list[tuple[str, str]] | None = None) -> None:
        self.source, self.path, self.message = source, path, message
        self.errors = errors if errors else [(path, message)]
        super().__init__(f"{source}: {path}: {message}")


class _Problems(ValueError):
    """Cross-reference problems; pydantic wraps it, parse_snapshot unwraps it."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p}: {m}" for p, m in problems))


def _one_of(what: str, value: Any, allowed: Any) -> Any:
    if value not in allowed:
        shown = ", ".join(map(str, sorted(allowed)))
        raise ValueError(f"unsupported {what} {value!r} (supported: {shown})")
    return value


MAX_DEPTH = 64  # no real export nests deeper; deeper input only feeds recursion
# A readable graph has far fewer; past these a page would be tens of MB of SVG.
MAX_ITEMS = {("document", "semantic", "nodes"): 10_000, ("document", "semantic", "edges"): 50_000,
             ("collaboration", "walkthrough", "steps"): 1_000}


def text_depth(text: str | bytes) -> int:
    """Deepest bracket nesting of JSON text, found without a recursive parser."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def value_depth(value: Any) -> int:
    """Deepest nesting of parsed JSON (iterative: a deep value cannot overflow the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _loads_if_str(value: Any) -> Any:
    # The exporter nests JSON documents inside JSON strings (anchor contexts).
    if not isinstance(value, str):
        return value
    if text_depth(value) > MAX_DEPTH:
        raise ValueError(f"nesting deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc})") from None


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Position(_Model):
    x: FiniteFloat
    y: FiniteFloat


class Camera(_Model):
    x: FiniteFloat
    y: FiniteFloat
    z: FiniteFloat = Field(gt=0)


class Viewport(_Model):
    width: FiniteFloat = Field(gt=0)
    height: FiniteFloat = Field(gt=0)


class LayerType(_Model):
    id: str | None = None
    name: str | None = None
    display_name: str | None = Field(None, alias="displayName")
    description: str | None = None
    parameters: list[dict[str, Any]] = []


class NodeMetadata(_Model):
    layer_type: LayerType | None = Field(None, alias="layerType")
    is_group: bool = Field(False, alias="isGroup")
    module_members: list[str] = Field([], alias="moduleMembers")
    module_template_id: str | None = Field(None, alias="moduleTemplateId")
    module_instance_id: str | None = Field(None, alias="moduleInstanceId")
    parent_id: str | None = Field(None, alias="parentId")


class Node(_Model):
    node_id: str
    kind: str
    op: str
    params: dict[str, Any] = {}
    in_ports: list[str] = []
    out_ports: list[str] = []
    metadata: NodeMetadata = NodeMetadata()

    _kind = field_validator("kind")(lambda value: _one_of("node kind", value, NODE_KINDS))

    @property
    def is_module(self) -> bool:
        return self.kind == "module" or self.metadata.is_group

    @property
    def parent_id(self) -> str | None:
        return self.metadata.parent_id

    @property
    def members(self) -> list[str]:
        return self.metadata.module_members


class Edge(_Model):
    edge_id: str
    source_node_id: str
    target_node_id: str
    source_port: str | None = None
    target_port: str | None = None


class Semantic(_Model):
    graph_id: str | None = None
    name: str
    revision: int | None = None
    nodes: list[Node]
    edges: list[Edge] = []


class DocumentView(_Model):
    node_positions: dict[str, Position]
    collapsed_modules: list[str] = []
    selection: list[str] = []


class Document(_Model):
    schema_version: int = Field(alias="schemaVersion")
    semantic: Semantic
    view: DocumentView

    _supported = field_validator("schema_version")(
        lambda value: _one_of("schemaVersion", value, SUPPORTED_SCHEMA_VERSIONS))


class Connection(_Model):
    kind: str
    source: str
    source_port: str | None = Field(None, alias="sourcePort")
    target: str
    target_port: str | None = Field(None, alias="targetPort")


class AnchorContext(_Model):
    connections: list[Annotated[Connection, BeforeValidator(_loads_if_str)]] = []
    contents: list[Annotated[dict[str, Any], BeforeValidator(_loads_if_str)]] = []
    node: dict[str, Any] | None = None


class AnchorTarget(_Model):
    kind: str
    node_id: str | None = Field(None, alias="nodeId")


class Anchor(_Model):
    target: AnchorTarget
    snapshot_id: str | None = Field(None, alias="snapshotId")
    context: Annotated[AnchorContext, BeforeValidator(_loads_if_str)] = AnchorContext()


class StepView(_Model):
    camera: Camera
    node_positions: dict[str, Position] = Field({}, alias="nodePositions")
    expanded_module_ids: list[str] = Field([], alias="expandedModuleIds")
    selected_node_ids: list[str] = Field([], alias="selectedNodeIds")
    viewport: Viewport


class Step(_Model):
    id: str
    title: str
    note: str = ""
    view: StepView
    anchors: list[Anchor] = []


class Walkthrough(_Model):
    title: str
    # A walkthrough without steps has nothing to open on.
    steps: list[Step] = Field(min_length=1)


class Collaboration(_Model):
    walkthrough: Walkthrough
    saved_views: list[Step] = Field([], alias="savedViews")
    opening_view_id: str | None = Field(None, alias="openingViewId")
    threads: list[Any] = []


class Snapshot(_Model):
    format: str
    version: int
    exported_at: str | None = Field(None, alias="exportedAt")
    status: str | None = None
    snapshot_id: str | None = Field(None, alias="snapshotId")
    document: Document
    collaboration: Collaboration

    _format = field_validator("format")(lambda value: _one_of("format", value, {FORMAT}))
    _version = field_validator("version")(
        lambda value: _one_of("version", value, SUPPORTED_VERSIONS))

    @model_validator(mode="after")
    def _cross_references(self) -> Snapshot:
        problems = _cross_reference_problems(self)
        if problems:
            raise _Problems(problems)
        return self

    # -- convenience (cached: a Snapshot is treated as immutable once loaded) --

    @property
    def name(self) -> str:
        return self.document.semantic.name

    @property
    def nodes(self) -> list[Node]:
        return self.document.semantic.nodes

    @property
    def edges(self) -> list[Edge]:
        return self.document.semantic.edges

    @property
    def steps(self) -> list[Step]:
        return self.collaboration.walkthrough.steps

    @cached_property
    def node_map(self) -> dict[str, Node]:
        return {n.node_id: n for n in self.nodes}

    @cached_property
    def node_ids(self) -> set[str]:
        return set(self.node_map)

    @cached_property
    def modules(self) -> list[Node]:
        return [n for n in self.nodes if n.is_module]

    @cached_property
    def _step_indices(self) -> dict[str, int]:
        return {s.id: i for i, s in enumerate(self.steps)}

    def node(self, node_id: str) -> Node:
        return self.node_map[node_id]

    def step_index(self, step_id: str) -> int:
        return self._step_indices[step_id]

    def step(self, step_id: str) -> Step:
        return self.steps[self.step_index(step_id)]

    @property
    def opening_step_id(self) -> str:
        # A saved view is only reachable as a step when it shares a step's id.
        opening = self.collaboration.opening_view_id
        return opening if opening in self._step_indices else self.steps[0].id

    def position(self, node_id: str) -> Position:
        return self.document.view.node_positions[node_id]

    def absolute_position(self, node_id: str,
                          positions: dict[str, Position] | None = None) -> Position:
        """World position; members are stored relative to their module.

        ``positions`` (e.g. a step's nodePositions) wins over the document's
        positions, which fill any node it lacks. KeyError if neither has it.
        """
        total_x = total_y = 0.0
        current: str | None = node_id
        while current is not None:  # acyclic: checked at load
            pos = (positions or {}).get(current)
            pos = self.position(current) if pos is None else pos
            total_x, total_y = total_x + pos.x, total_y + pos.y
            current = self.node(current).parent_id
        return Position(x=total_x, y=total_y)


# -- cross-references -----------------------------------------------------------

def _cross_reference_problems(snap: Snapshot) -> list[tuple[str, str]]:
    """Every dangling or contradictory id, as (JSON path, message), file order."""
    out: list[tuple[str, str]] = []
    sem = "document.semantic"
    by_id: dict[str, Node] = {}
    index: dict[str, int] = {}
    for i, node in enumerate(snap.document.semantic.nodes):
        if node.node_id in by_id:
            out.append((f"{sem}.nodes[{i}].node_id", f"duplicate id {node.node_id!r}"))
        else:
            by_id[node.node_id], index[node.node_id] = node, i

    def ref(path: str, node_id: str | None, module: bool = False) -> None:
        if node_id is None:
            return
        if node_id not in by_id:
            out.append((path, f"unknown node {node_id!r}"))
        elif module and not by_id[node_id].is_module:
            out.append((path, f"{node_id!r} is not a module"))

    for i, edge in enumerate(snap.document.semantic.edges):
        ref(f"{sem}.edges[{i}].source_node_id", edge.source_node_id)
        ref(f"{sem}.edges[{i}].target_node_id", edge.target_node_id)

    # Membership is stored twice (moduleMembers and parentId); both must agree.
    for i, node in enumerate(snap.document.semantic.nodes):
        meta = f"{sem}.nodes[{i}].metadata"
        if node.members and not node.is_module:
            out.append((f"{meta}.moduleMembers", f"{node.node_id!r} is not a module but lists members"))
        for j, member in enumerate(node.members):
            if member not in by_id:
                out.append((f"{meta}.moduleMembers[{j}]", f"unknown node {member!r}"))
            elif (claimed := by_id[member].parent_id) != node.node_id:
                out.append((f"{sem}.nodes[{index[member]}].metadata.parentId",
                            f"{'missing' if claimed is None else repr(claimed)}, but module "
                            f"{node.node_id!r} lists {member!r} as a member"))
        parent = node.parent_id
        if parent is not None:
            ref(f"{meta}.parentId", parent, module=True)
            if parent in by_id and by_id[parent].is_module and node.node_id not in by_id[parent].members:
                out.append((f"{meta}.parentId", f"module {parent!r} does not list "
                            f"{node.node_id!r} in moduleMembers"))
    for node_id in by_id:
        chain, current = [node_id], by_id[node_id].parent_id
        while current in by_id and current not in chain:
            chain.append(current)
            current = by_id[current].parent_id
        if current == node_id:  # report each cycle once, at its node
            out.append((f"{sem}.nodes[{index[node_id]}].metadata.parentId",
                        "module membership cycle: " + " -> ".join(chain + [node_id])))

    view = snap.document.view
    for i, node_id in enumerate(view.collapsed_modules):
        ref(f"document.view.collapsed_modules[{i}]", node_id, module=True)
    for i, node_id in enumerate(view.selection):
        ref(f"document.view.selection[{i}]", node_id)

    collab = snap.collaboration
    groups = [("collaboration.walkthrough.steps", collab.walkthrough.steps),
              ("collaboration.savedViews", collab.saved_views)]
    for base, steps in groups:
        seen: set[str] = set()
        for i, step in enumerate(steps):
            if step.id in seen:
                out.append((f"{base}[{i}].id", f"duplicate id {step.id!r}"))
            seen.add(step.id)
            for j, node_id in enumerate(step.view.expanded_module_ids):
                ref(f"{base}[{i}].view.expandedModuleIds[{j}]", node_id, module=True)
            for j, node_id in enumerate(step.view.selected_node_ids):
                ref(f"{base}[{i}].view.selectedNodeIds[{j}]", node_id)
            for j, anchor in enumerate(step.anchors):
                ref(f"{base}[{i}].anchors[{j}].target.nodeId", anchor.target.node_id)
    view_ids = {s.id for _, steps in groups for s in steps}
    if collab.opening_view_id is not None and collab.opening_view_id not in view_ids:
        out.append(("collaboration.openingViewId",
                    f"{collab.opening_view_id!r} names no step or saved view"))
    return out


# -- loading ------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _render_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:  # dict keys such as node ids ('python@ratio#0') would read as paths
            out += f"[{json.dumps(part)}]"
    return out or "$"


def _flatten(exc: ValidationError) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False):
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, _Problems):
            found.extend(cause.problems)
        elif isinstance(cause, Exception):
            # Our own validators' messages, without pydantic's "Value error, ".
            found.append((_render_loc(err["loc"]), str(cause)))
        else:
            found.append((_render_loc(err["loc"]), err["msg"]))
    return found


def parse_snapshot(raw: bytes | str | dict, source: str = "<upload>") -> Snapshot:
    """Parse and validate an export; raises only SnapshotError."""
    if isinstance(raw, dict):
        data: Any = raw
        if value_depth(data) > MAX_DEPTH:
            raise SnapshotError(source, "$", f"nesting deeper than {MAX_DEPTH} levels")
    else:
        if text_depth(raw) > MAX_DEPTH:
            raise SnapshotError(source, "$", f"nesting deeper than {MAX_DEPTH} levels")
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise SnapshotError(source, "$", f"not valid JSON ({exc})") from None
        except RecursionError:
            raise SnapshotError(source, "$", "JSON nested too deeply") from None
    if not isinstance(data, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(data), "a number")
        raise SnapshotError(source, "$", f"top level must be a JSON object, not {kind}")
    for keys, limit in MAX_ITEMS.items():
        items = data
        for key in keys:
            items = items.get(key) if isinstance(items, dict) else None
        if isinstance(items, list) and len(items) > limit:
            raise SnapshotError(source, ".".join(keys), f"{len(items)} items exceed the limit of {limit}")
    try:
        return Snapshot.model_validate(data)
    except ValidationError as exc:
        errors = _flatten(exc)
        raise SnapshotError(source, *errors[0], errors=errors) from None


def load_snapshot(path: pathlib.Path) -> Snapshot:
    """Read one export file; OSError propagates, bad content is SnapshotError."""
    return parse_snapshot(pathlib.Path(path).read_bytes(), source=pathlib.Path(path).name)
