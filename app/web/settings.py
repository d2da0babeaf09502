"""All configuration in one place: CLI flags and environment variables map here."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # the repository: templates/, static/, walkthroughs/


class Settings(BaseSettings):
    """Read from the environment (e.g. WALKTHROUGHS_DIR, DEVICE, PORT)."""

    model_config = SettingsConfigDict(env_prefix="", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    walkthroughs_dir: Path = PROJECT_ROOT / "walkthroughs"
    # The training paths; the embedded file unless overridden (env PROCESSES_FILE).
    processes_file: Path = PROJECT_ROOT / "walkthroughs" / "processes.toml"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    workers: int = Field(1, ge=1, le=64)
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    # torch's default intra-op pool only adds overhead for tensors this small
    torch_threads: int = Field(1, ge=1, le=256)
    # Uncached computations running at once (COMPUTE_SLOTS) and waiting (COMPUTE_QUEUE);
    # past that a request gets 503 + Retry-After instead of piling onto the CPU.
    compute_slots: int = Field(2, ge=1, le=64)
    compute_queue: int = Field(64, ge=0, le=10_000)
    # Whole-response cache for deterministic GETs (RESPONSE_CACHE_MB; 0 turns it off).
    response_cache_mb: int = Field(64, ge=0, le=4096)
    # Uploaded snapshots: content-addressed files, at most MAX_UPLOADS kept.
    uploads_dir: Path = Path("/tmp/grpo-walkthrough-uploads")
    max_uploads: int = Field(64, ge=1, le=10_000)
