"""Whether a GGUF file can be loaded and trained here, decided before anything is loaded.

`check_gguf` reads the file's metadata and tensor infos (GGUFReader maps the file; no weight is
dequantized) and refuses, with every reason at once, a file that
- has another architecture than those gguf_file.py reads (`general.architecture`, named, with ours), or a
  config the decoder does not implement (another RoPE scaling, partial RoPE, ...);
- has a vocabulary the tokenizer cannot build (not byte-level BPE, an unknown pre-tokenizer);
- holds a tensor of a type `gguf.quants.dequantize` cannot dequantize (I32, Q8_K, ...: named, with the
  first tensor of that type), which the conversion would only meet after minutes of work;
- would not fit in memory for a float32 training step: its parameters × 4 bytes × `TRAINING_COPIES`,
  against the memory available now (/proc/meminfo's MemAvailable).

A file that passes returns its `ModelCheck`: the figures the refusal would have quoted.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

from app.engine.lm.gguf_file import ROPE_FREQS, architecture_of, config_from_gguf, field_value
from app.engine.lm.text import vocabulary_problem

FLOAT32_BYTES = 4
# what a float32 GRPO training step holds per parameter: the policy, the checkpoint (the old policy and the
# reference share one frozen copy), the policy's gradients and AdamW's two moments (exp_avg, exp_avg_sq)
TRAINING_COPIES = ("policy", "checkpoint (old policy and reference)", "gradients", "AdamW exp_avg",
                   "AdamW exp_avg_sq")
BYTES_PER_PARAMETER = FLOAT32_BYTES * len(TRAINING_COPIES)


class UnsupportedModel(ValueError):
    """A GGUF file this stack refuses; `reasons` holds each reason, the message all of them."""

    def __init__(self, source: str, reasons: list[str]):
        self.reasons = list(reasons)
        super().__init__(f"{source} cannot be used here: " + "; ".join(self.reasons))


@dataclass(frozen=True)
class ModelCheck:
    architecture: str
    parameters: int  # every weight tensor's elements (a tied embedding once; rope_freqs is config)
    training_bytes: int  # parameters × BYTES_PER_PARAMETER
    available_bytes: int  # the memory it was held against


def available_memory() -> int:
    """Bytes the machine can give now without swapping: MemAvailable (Linux), else the free pages."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the file counts kB
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def memory_problem(parameters: int, memory_bytes: int | None = None) -> tuple[str | None, int]:
    """(why a float32 training step of this many parameters would not fit, or None; the memory held to)."""
    available = available_memory() if memory_bytes is None else memory_bytes
    needed = parameters * BYTES_PER_PARAMETER
    if needed <= available:
        return None, available
    return (f"a float32 training step needs about {_gib(needed)} ({parameters:,} parameters × "
            f"{FLOAT32_BYTES} bytes × {len(TRAINING_COPIES)}: {', '.join(TRAINING_COPIES)}), and "
            f"{_gib(available)} of memory is available"), available


def check_memory(parameters: int, memory_bytes: int | None = None, source: str = "the model") -> None:
    """The memory refusal alone, for a load whose file was checked before (its figures cached)."""
    problem, _ = memory_problem(parameters, memory_bytes)
    if problem is not None:
        raise UnsupportedModel(source, [problem])


@functools.cache
def can_dequantize(kind: GGMLQuantizationType) -> bool:
    """Whether gguf.quants.dequantize reads this type: tried on one block of zeros (the library's own
    answer, not a list of ours that could fall behind it)."""
    _, type_size = GGML_QUANT_SIZES[kind]
    try:
        dequantize(np.zeros(type_size, dtype=np.uint8), kind)
    except NotImplementedError:
        return False
    return True


def parameter_count(reader: GGUFReader) -> int:
    return sum(int(t.n_elements) for t in reader.tensors if t.name != ROPE_FREQS)


def check_gguf(source: Path | GGUFReader, memory_bytes: int | None = None) -> ModelCheck:
    """The file's figures if it can be loaded and trained here; else UnsupportedModel with every reason.
    `memory_bytes` defaults to the memory available now."""
    reader = source if isinstance(source, GGUFReader) else GGUFReader(source)
    name = Path(str(getattr(reader.data, "filename", None) or "the GGUF file")).name
    reasons: list[str] = []
    architecture = str(field_value(reader, "general.architecture", "?"))
    try:
        architecture = architecture_of(reader)
        config_from_gguf(reader)
    except ValueError as exc:
        reasons.append(str(exc))
    problem = vocabulary_problem(reader)
    if problem is not None:
        reasons.append(problem)
    unreadable: dict[str, list[str]] = {}
    for tensor in reader.tensors:
        if not can_dequantize(tensor.tensor_type):
            unreadable.setdefault(tensor.tensor_type.name, []).append(tensor.name)
    for kind, names in unreadable.items():
        others = f" and {len(names) - 1} more" if len(names) > 1 else ""
        reasons.append(f"tensor {names[0]}{others} is {kind}, which gguf.quants.dequantize cannot dequantize")
    parameters = parameter_count(reader)
    problem, available = memory_problem(parameters, memory_bytes)
    if problem is not None:
        reasons.append(problem)
    if reasons:
        raise UnsupportedModel(name, reasons)
    return ModelCheck(architecture=architecture, parameters=parameters,
                      training_bytes=parameters * BYTES_PER_PARAMETER, available_bytes=available)
