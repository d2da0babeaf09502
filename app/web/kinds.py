"""The kind registry: the one file that names the walkthrough kinds (docs/design.md §5).

Order matters: the first kind whose engine matches a snapshot runs it (datasette's firstresult
hooks); a snapshot none matches is view-only. A test may build an app with its own registry
(`create_app(settings, kinds=...)`), so a throwaway kind needs no line here.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.domain.catalog import Reader
from app.domain.snapshot import Snapshot
from app.kinds.step_record.web.kind import KIND as STEP_RECORD
from app.kinds.tiny_lm.web.kind import KIND as TINY_LM
from app.kinds.toy.web.kind import KIND as TOY
from app.views import meaning
from app.web.kind import Kind
from app.web.rendering import add_template_dirs

# The tiny LM first: its words for nodes (the GRPO head's templates, shared with the toy's) are the
# more specific; the two engines' matchers are exact, so their order does not matter.
KINDS: tuple[Kind, ...] = (TINY_LM, TOY, STEP_RECORD)

# Every known kind's words for nodes, once: they describe graphs shaped like a kind's model (an
# upload that no engine of this app runs still reads in them), whichever kinds an app serves.
meaning.DESCRIBERS[:] = [k.describe for k in KINDS if k.describe is not None]
add_template_dirs([k.templates for k in KINDS if k.templates is not None])


@dataclass(frozen=True)
class KindRegistry:
    kinds: tuple[Kind, ...]

    def __post_init__(self) -> None:
        ids = [k.id for k in self.kinds]
        if len(set(ids)) != len(ids):
            raise ValueError(f"two kinds share an id: {ids}")

    def classify(self, snapshot: Snapshot) -> str | None:
        """The id of the first kind whose engine runs `snapshot`, or None (view-only)."""
        return next((k.id for k in self.kinds if k.matches(snapshot)), None)

    @property
    def readers(self) -> tuple[Reader, ...]:
        """Every kind's own file formats (step records), asked before a file is read as a snapshot."""
        return tuple(k.reader for k in self.kinds if k.reader is not None)

    def get(self, kind_id: str | None) -> Kind | None:
        return next((k for k in self.kinds if k.id == kind_id), None)

    @property
    def tasks(self) -> dict:
        """Every kind's job tasks by name (names are unique across kinds)."""
        found = {t.name: t for k in self.kinds for t in k.tasks}
        if len(found) != sum(len(k.tasks) for k in self.kinds):
            raise ValueError("two kinds share a job task name")
        return found

    def allowed_range(self, name: str) -> str | None:
        for kind in self.kinds:
            if kind.allowed_range is not None and (found := kind.allowed_range(name)) is not None:
                return found
        return None


def registry(kinds: Sequence[Kind] = KINDS) -> KindRegistry:
    return KindRegistry(tuple(kinds))
