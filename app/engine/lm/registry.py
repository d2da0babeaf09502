"""The GGUF files a server runs as walkthroughs of their own, besides its default model: those named by
GGUF_MODELS=FILE[:FILE…] and those remembered in DATA_DIR/models.json (`python -m app models add FILE`).

A file is described once per version (path, size, modification time): its `general.name`, the walkthrough
id derived from it, its configuration and end-of-turn token, after `check_gguf` has passed it (another
architecture, a quantization we cannot dequantize, or too large for this machine's memory: refused with
its reasons, before any weight is read). Shared by every language-model kind: it names none.
"""
from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from gguf import GGUFReader

from app.engine.lm.check import ModelCheck, UnsupportedModel, check_gguf
from app.engine.lm.decoder import DecoderConfig
from app.engine.lm.gguf_file import config_from_gguf, field_value

ENV = "GGUF_MODELS"
REMEMBERED = "models.json"  # in DATA_DIR: {"models": ["/abs/path.gguf", …]}
FAMILY = {"llama": "Llama", "qwen2": "Qwen2", "qwen3": "Qwen3"}


@dataclass(frozen=True)
class ModelFile:
    path: Path  # absolute
    name: str  # general.name, else the file's stem
    walkthrough_id: str
    architecture: str  # general.architecture
    config: DecoderConfig
    end_token: str  # the token generation stops at (<|im_end|>, <|eot_id|>, …)
    check: ModelCheck

    @property
    def family(self) -> str:
        return FAMILY.get(self.architecture, self.architecture)


def walkthrough_id(name: str) -> str:
    """"Qwen2.5 0.5B Instruct" -> "qwen2_5_0_5b_instruct_grpo": lower case, runs of other characters as one
    `_`; a URL segment and a file name (the catalog's ids are file stems)."""
    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "model"
    return f"{slug[:60]}_grpo"


# A per-process memo of immutable data, not an app's state: what a model file says of itself, keyed by its
# path, size and modification time (a changed file is read again), identical whichever app asks.
_lock = threading.Lock()
_described: dict[tuple[Path, int, int], ModelFile] = {}


def describe(path: Path | str, memory_bytes: int | None = None) -> ModelFile:
    """The file's description, if this stack can run it here; UnsupportedModel (every reason) if not,
    FileNotFoundError if there is no such file. Kept per version of the file."""
    path = Path(path).expanduser().resolve()
    stat = path.stat()
    key = (path, stat.st_size, stat.st_mtime_ns)
    with _lock:
        if key in _described:
            return _described[key]
    reader = GGUFReader(path)
    check = check_gguf(reader, memory_bytes)
    name = str(field_value(reader, "general.name", "") or "").strip() or path.stem
    tokens = reader.fields["tokenizer.ggml.tokens"]
    eos = int(field_value(reader, "tokenizer.ggml.eos_token_id"))
    end = bytes(tokens.parts[tokens.data[eos]]).decode("utf-8", "replace")
    model = ModelFile(path=path, name=name, walkthrough_id=walkthrough_id(name), architecture=check.architecture,
                      config=config_from_gguf(reader), end_token=end, check=check)
    with _lock:
        _described[key] = model
    return model


def remembered(data_dir: Path) -> list[Path]:
    """The files `models add` remembered in this data directory, in the order added."""
    file = Path(data_dir) / REMEMBERED
    if not file.is_file():
        return []
    return [Path(p) for p in json.loads(file.read_text(encoding="utf-8")).get("models", [])]


def listed(data_dir: Path, env: str | None = None) -> list[Path]:
    """GGUF_MODELS's files (`env`; default: the environment's), then the remembered ones; each once."""
    named = os.environ.get(ENV, "") if env is None else env
    paths = [Path(p).expanduser().resolve() for p in named.split(os.pathsep) if p.strip()]
    return list(dict.fromkeys(paths + remembered(data_dir)))


def _write(data_dir: Path, paths: list[Path]) -> None:
    file = Path(data_dir) / REMEMBERED
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(file.name + ".tmp")
    tmp.write_text(json.dumps({"models": [str(p) for p in paths]}, indent=1) + "\n", encoding="utf-8")
    tmp.replace(file)


def remember(data_dir: Path, path: Path | str) -> ModelFile:
    """Check the file (UnsupportedModel, FileNotFoundError) and remember it in the data directory."""
    model = describe(path)
    known = remembered(data_dir)
    if model.path not in known:
        _write(data_dir, [*known, model.path])
    return model


def forget(data_dir: Path, path_or_id: str) -> bool:
    """Forget a remembered file, named by its path or its walkthrough's id; whether one was."""
    known = remembered(data_dir)
    keep = []
    for path in known:
        same = str(path) == str(Path(path_or_id).expanduser().resolve())
        if not same and path.is_file():
            try:
                same = describe(path).walkthrough_id == path_or_id
            except (UnsupportedModel, OSError):
                pass
        if not same:
            keep.append(path)
    if len(keep) != len(known):
        _write(data_dir, keep)
    return len(keep) != len(known)
