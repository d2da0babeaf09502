"""Results of the research reproductions (`make reproduce`), kept on disk by code version.

The five-seed training paths take minutes of torch each; their assertions take milliseconds. A
result is computed once per *code version* (a digest of every file that can change it: the app's
code and data, the base checkpoints, and the torch and Python versions) and kept under
REPRODUCE_CACHE (default: ~/.cache/grpo-walkthrough/reproduce). A rerun with unchanged code reads
the results back and runs every assertion again on them; any change to app/ or walkthroughs/
starts a new version, so a stale result can never pass for a new one. Parallel workers (pytest -n)
share the folder: a file lock per result means each is computed once, by whichever worker asks first.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch
from filelock import FileLock  # Unlicense; installed with torch (its own dependency)
from paths import ROOT

T = TypeVar("T")

# What a training path's numbers can depend on: the code and data of the app (the kinds' tasks,
# models and checkpoints all live under app/ and walkthroughs/).
VERSIONED = ("app", "walkthroughs")


@functools.cache
def code_version() -> str:
    digest = hashlib.sha256()
    for top in VERSIONED:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(f"torch {torch.__version__} python {platform.python_version()} {sys.platform}".encode())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    base = os.environ.get("REPRODUCE_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") \
        / "grpo-walkthrough" / "reproduce"
    return Path(base) / code_version()


def kept(name: str, compute: Callable[[], T]) -> T:
    """compute(), or its result from an earlier run of this code version."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.pickle"
    with FileLock(str(path) + ".lock"):
        if path.exists():
            return pickle.loads(path.read_bytes())
        value = compute()
        partial = path.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(value))
        partial.replace(path)  # whole or absent: a killed run leaves no half-written result
        return value
