"""A GGUF language model loaded for the stack: its decoder, tokenizer, chat template and special ids.

`load_gguf(path, cache_dir)` first checks the file (check.py: its architecture, its tensor types, whether a
float32 training step of it fits the memory available), then converts its weights once
(gguf_file.load_checkpoint keeps them as safetensors named by the file's sha256) and keeps the tokenizer,
template, special ids and parameter count beside them under the same hash, so a later load reads neither
the GGUF's tensors nor its metadata (its memory check uses the kept count). Which file is loaded is the
caller's business (a kind's default, a user's GGUF_MODELS entry).
"""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gguf import GGUFReader
from tokenizers import Tokenizer

from app.engine.lm.check import check_gguf, check_memory, parameter_count
from app.engine.lm.decoder import Decoder, DecoderConfig
from app.engine.lm.gguf_file import CACHE_FORMAT, CACHE_PREFIX, cache_path, file_sha256, load_checkpoint
from app.engine.lm.text import SpecialIds, build_tokenizer, chat_prompt, chat_template, special_ids, template_variables


@dataclass(frozen=True)
class LoadedModel:
    model: Decoder
    tokenizer: Tokenizer
    chat_template: str
    config: DecoderConfig
    source_sha256: str  # of the GGUF file
    load_seconds: float  # this process's load: weights (converted or cached), tokenizer and template
    special_ids: SpecialIds
    meta: dict[str, Any]  # load_checkpoint's (cache_path, converted, seconds), text_cached and parameters

    def chat_prompt(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True) -> str:
        """The chat template rendered as transformers' apply_chat_template renders it: with the special
        tokens' strings as variables (`{{ bos_token }}`: Llama 3's template begins with it)."""
        return chat_prompt(self.chat_template, messages, add_generation_prompt,
                           **template_variables(self.tokenizer, self.special_ids))

    def chat_ids(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True) -> list[int]:
        """That prompt's ids, encoded without special tokens added (apply_chat_template(tokenize=True) does
        the same): a template that writes BOS is not given a second one."""
        return list(self.tokenizer.encode(self.chat_prompt(messages, add_generation_prompt),
                                          add_special_tokens=False).ids)


def _text_cache_path(cache_dir: Path, source_sha256: str) -> Path:
    return cache_dir / f"{CACHE_PREFIX}-{source_sha256[:16]}.text.json"


def _read_text_cache(path: Path, source_sha256: str) -> tuple[Tokenizer, str, SpecialIds, int] | None:
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        if kept.get("source_sha256") != source_sha256 or kept.get("format") != CACHE_FORMAT:
            return None
        return (Tokenizer.from_str(kept["tokenizer"]), kept["chat_template"], SpecialIds(**kept["special_ids"]),
                int(kept["parameters"]))
    except Exception:  # a torn or foreign file (json, tokenizers or a missing key): build again
        return None


def _write_text_cache(path: Path, source_sha256: str, tokenizer: Tokenizer, template: str, ids: SpecialIds,
                      parameters: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = {"source_sha256": source_sha256, "format": CACHE_FORMAT, "tokenizer": tokenizer.to_str(),
            "chat_template": template, "special_ids": asdict(ids), "parameters": parameters}
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_text(json.dumps(kept), encoding="utf-8")
    os.replace(temporary, path)


def load_gguf(path: Path, cache_dir: Path, memory_bytes: int | None = None) -> LoadedModel:
    """The file's model, tokenizer, template and special ids; UnsupportedModel (check.py) before anything
    is loaded when the file cannot be used here (`memory_bytes`: the memory to fit, default what is
    available now).

    Opening the GGUF file's metadata costs ~2 s (49,152 tokens and 48,900 merges parsed in Python), so
    the tokenizer, template, special ids and parameter count are kept beside the converted weights, under
    the same hash: a cached load reads neither the GGUF's tensors nor its metadata, only hashes it (the
    file passed the other checks when it was converted; the memory is checked again, on the kept count)."""
    started = time.perf_counter()
    source_sha256 = file_sha256(path)
    text_path = _text_cache_path(cache_dir, source_sha256)
    text = _read_text_cache(text_path, source_sha256)
    reader = None if text is not None and cache_path(cache_dir, source_sha256).is_file() else GGUFReader(path)
    if reader is None:
        assert text is not None
        check_memory(text[3], memory_bytes, source=Path(path).name)
    else:
        check_gguf(reader, memory_bytes)
    model, meta = load_checkpoint(path, cache_dir, reader=reader)
    if text is None:
        assert reader is not None  # nothing kept: the file was opened (and checked) above
        tokenizer = build_tokenizer(reader)
        text = tokenizer, chat_template(reader), special_ids(reader, tokenizer), parameter_count(reader)
        _write_text_cache(text_path, source_sha256, *text)
        meta["text_cached"] = False
    else:
        meta["text_cached"] = True
    tokenizer, template, ids, meta["parameters"] = text
    return LoadedModel(model=model, tokenizer=tokenizer, chat_template=template, config=model.cfg,
                       source_sha256=meta["source_sha256"], load_seconds=time.perf_counter() - started,
                       special_ids=ids, meta=meta)
