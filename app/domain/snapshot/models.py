"""Typed model of a `tensorviz.graph` export (format version 3, schemaVersion 2).

Unknown fields are kept (``extra="allow"``) so a newer exporter never breaks
loading; what the app relies on is checked, and every refusal names the field
by its JSON path, e.g. ``collaboration.walkthrough.steps[2].view.camera.z``.
Nothing in a snapshot is ever executed.
"""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
)

from app.domain.snapshot.fields import Coordinate, Extent, Offset, Zoom, linkable, loads_if_str, one_of

FORMAT = "tensorviz.graph"
SUPPORTED_VERSIONS = {3}
SUPPORTED_SCHEMA_VERSIONS = {2}
NODE_KINDS = ("input", "output", "module", "layer")


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Position(_Model):
    x: Coordinate
    y: Coordinate


class Camera(_Model):
    x: Offset
    y: Offset
    z: Zoom


class Viewport(_Model):
    width: Extent
    height: Extent


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

    _kind = field_validator("kind")(lambda value: one_of("node kind", value, NODE_KINDS))

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
        lambda value: one_of("schemaVersion", value, SUPPORTED_SCHEMA_VERSIONS))


class Connection(_Model):
    kind: str
    source: str
    source_port: str | None = Field(None, alias="sourcePort")
    target: str
    target_port: str | None = Field(None, alias="targetPort")


class AnchorContext(_Model):
    connections: list[Annotated[Connection, BeforeValidator(loads_if_str)]] = []
    contents: list[Annotated[dict[str, Any], BeforeValidator(loads_if_str)]] = []
    node: dict[str, Any] | None = None


class AnchorTarget(_Model):
    kind: str
    node_id: str | None = Field(None, alias="nodeId")


class Anchor(_Model):
    target: AnchorTarget
    snapshot_id: str | None = Field(None, alias="snapshotId")
    context: Annotated[AnchorContext, BeforeValidator(loads_if_str)] = AnchorContext()


class StepView(_Model):
    camera: Camera
    node_positions: dict[str, Position] = Field({}, alias="nodePositions")
    expanded_module_ids: list[str] = Field([], alias="expandedModuleIds")
    selected_node_ids: list[str] = Field([], alias="selectedNodeIds")
    viewport: Viewport


class Step(_Model):
    id: Annotated[str, AfterValidator(linkable)]  # saved views are Steps too
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

    _format = field_validator("format")(lambda value: one_of("format", value, {FORMAT}))
    _version = field_validator("version")(
        lambda value: one_of("version", value, SUPPORTED_VERSIONS))

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
    def module_template_ids(self) -> frozenset[str]:
        """The modules' `moduleTemplateId`s: which model the export was traced from."""
        return frozenset(t for n in self.nodes if (t := n.metadata.module_template_id))

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


