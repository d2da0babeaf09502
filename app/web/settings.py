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
    # COMPUTE_PROCESSES: run those computations in COMPUTE_SLOTS worker processes (the default;
    # app/web/compute_pool.py), so torch and JSON encoding never hold the web process's GIL;
    # 0 runs them in threads of the web process (the test suite's TestClient apps).
    compute_processes: bool = True
    # Whole-response cache for deterministic GETs (RESPONSE_CACHE_MB; 0 turns it off).
    response_cache_mb: int = Field(64, ge=0, le=4096)
    # Limits at the edge (docs/reference/configuration.md "Limits"): a computation waits at most COMPUTE_WAIT_S for a
    # slot (then 503); a request head over MAX_HEADER_KB gets 431, one not complete within
    # HEADER_TIMEOUT_S gets 408; a body over MAX_BODY_KB gets 413 (the upload routes: a 32 MB
    # file plus 64 KiB of form; the store then holds a snapshot to 2 MB), and KEEP_ALIVE_S closes
    # a connection idle between requests.
    compute_wait_s: float = Field(2.0, gt=0, le=60)
    max_header_kb: int = Field(64, ge=1, le=1024)
    header_timeout_s: float = Field(10.0, gt=0, le=600)
    max_body_kb: int = Field(64, ge=1, le=1_048_576)
    keep_alive_s: int = Field(5, ge=1, le=600)
    # Uploaded snapshots (docs/how-to/manage-uploads.md): content-addressed, kept until an operator deletes
    # them, never evicted. DATA_DIR holds the SQLite store (UPLOADS_DIR, its old name, is still
    # read); DATABASE_URL=postgresql://... keeps them in PostgreSQL instead, shared by replicas.
    # Past UPLOAD_QUOTA_MB in all, new uploads get 507; UPLOAD_CACHE_MB bounds each worker's
    # cache of parsed uploads (weighed by their raw bytes).
    data_dir: Path | None = None
    # GGUF_MODELS=FILE[:FILE…]: Llama or Qwen GGUF files served as real-model walkthroughs of their own, besides
    # those `python -m app models add FILE` remembered in DATA_DIR/models.json (app/engine/lm/registry.py)
    gguf_models: str = ""
    uploads_dir: Path | None = None
    xdg_data_home: Path | None = None
    database_url: str | None = None  # holds a password, perhaps: never logged
    upload_quota_mb: int = Field(512, ge=1, le=1_048_576)
    upload_cache_mb: int = Field(64, ge=0, le=4096)
    # A whole run sent from the browser or `POST /api/runs` as one archive: at most RUN_UPLOAD_MAX_MB as sent
    # (413 past it, before the rest is read) and as unpacked, streamed to DATA_DIR/tmp, never held in memory.
    run_upload_max_mb: int = Field(1024, ge=1, le=1_048_576)
    # Training runs (docs/explanation/jobs.md): rows in the same store (DATA_DIR's SQLite file or DATABASE_URL).
    # JOB_RUNNER: "process" (default) starts one runner process (`python -m app.worker`) beside each
    # web process; "off" (`--no-runner`) serves only, for replicas whose runs are computed by workers
    # elsewhere; "thread" runs them in the web process itself (the test suite's apps). A runner lost
    # for JOB_LEASE_S (killed, crashed, its machine gone) loses its job to another runner.
    job_runner: Literal["process", "thread", "off"] = "process"
    job_lease_s: float = Field(30.0, ge=1.0, le=3600.0)
    # The runner process's share of the machine (app/engine/runtime/job_cpu.py): its nice value (JOB_NICE,
    # 19: the lowest priority, so pages always win the CPU) and its cores (JOB_CPUS; 0: all but one where
    # there are two or more, so one core is always left to serving). Each job's torch threads <= JOB_CPUS.
    job_nice: int = Field(19, ge=0, le=19)
    job_cpus: int = Field(0, ge=0, le=4096)
    # Only a POST starts a run (docs/explanation/jobs.md, "A fair, bounded queue"). Each client (its
    # address) may start JOB_STARTS_BURST runs at once and JOB_STARTS_PER_MIN a minute after that
    # (then 429 + Retry-After); past JOB_QUEUE_MAX queued runs in the store, a new one gets 503 +
    # Retry-After and nothing is stored. A queued run nobody reads for JOB_WANT_S expires. DEFAULT_RUNS:
    # the server queues its kinds' default runs at start-up (kept until done), so a first visitor finds
    # them computed.
    job_want_s: float = Field(60.0, ge=1.0, le=86_400.0)
    job_starts_burst: int = Field(20, ge=1, le=100_000)
    job_starts_per_min: float = Field(30.0, gt=0, le=1_000_000)
    job_queue_max: int = Field(200, ge=1, le=1_000_000)
    default_runs: bool = True
    # WARM_UP: before /readyz says ready, each compute worker draws every step of the featured walkthroughs
    # once (imports, checkpoints, graph layouts, default steps) and the web process replays them into its
    # response cache (app/web/warm_up.py), so a newcomer's first pages come at warm speed.
    warm_up: bool = True

    @property
    def resolved_data_dir(self) -> Path:
        """DATA_DIR, else UPLOADS_DIR, else $XDG_DATA_HOME/grpo-walkthrough (~/.local/share/...)."""
        return self.data_dir or self.uploads_dir or (
            (self.xdg_data_home or Path.home() / ".local" / "share") / "grpo-walkthrough")
