"""What a kind offers the exporter (`python -m app.export --model NAME`): a model with example
inputs. A target is any nn.Module with inputs that run it once; the trace needs no weights that
mean anything (values are not exported), only the shapes and the code path. Each kind lists its
own in its manifest (`Kind.export_targets`)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch loads only when a model is built: the CLI's --help stays instant
    from torch import nn


@dataclass(frozen=True)
class ExportTarget:
    name: str
    description: str
    build: Callable[[], tuple[nn.Module, tuple[Any, ...]]]  # the model and example inputs for one forward pass
    select_output: Callable[[Any], Any] = lambda out: out  # which part of forward's result is the Output node's
    statement_modules: frozenset[str] = frozenset()  # modules drawn with one `Python` statement member
    # the same model on a file's configuration (`--from FILE`: a GGUF file's sizes), for targets that take one
    from_file: Callable[[Path], tuple[nn.Module, tuple[Any, ...]]] | None = None
