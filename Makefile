# Every target installs what it needs into .venv first, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

SPACE ?= mqar_recall
PROFILE ?=
SEEDS ?=
# An Optuna search: train this many more trials now (make sweep SPACE=local_digits PROFILE=optuna TRIALS=4)
TRIALS ?=
RESULTS ?= results
Q ?= SELECT space, status, count(*) AS trials FROM trials GROUP BY ALL ORDER BY ALL
# One tolerance for every verdict, in the metric's units (make sql/report TOLERANCE=0.3); empty: each space's own
TOLERANCE ?=
# Experiment trackers for sweep and rerun, besides the space's `log:` (make sweep LOG=mlflow,tensorboard)
LOG ?=
comma := ,
LOG_ARGS = $(foreach tracker,$(subst $(comma), ,$(LOG)),--log $(tracker))

.PHONY: install lock test test-quick lint format sweep plan spaces sql report rerun bench gpu-check gpu-smoke trial known-answers preflight-shipped clean

install: $(INSTALLED)

# The versions CI tested: requirements.lock constrains every package pip installs (the project itself stays
# editable and unpinned). Refresh it deliberately with `make lock`.
$(INSTALLED): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock -e '.[dev]'
	touch $(INSTALLED)

# Re-resolve requirements.lock from pyproject.toml with uv (pinned here, so the lock's tool is locked too).
# Versions already in the lock are kept where they still satisfy pyproject.toml; UPGRADE=1 takes the newest.
# uv does not read pip's configuration, so the extra indexes and wheel folders pip is set up with here
# (`pip config list`) are passed on: the lock then resolves what `make install` will install.
UV_VERSION := 0.13.9
PIP_EXTRA_INDEXES = $(shell $(BIN)/pip config get global.extra-index-url 2>/dev/null)
PIP_FIND_LINKS_DIRS = $(shell $(BIN)/pip config get global.find-links 2>/dev/null)
lock: $(INSTALLED)
	$(BIN)/pip install --quiet 'uv==$(UV_VERSION)'
	$(BIN)/uv pip compile pyproject.toml --extra dev --python $(BIN)/python --index-strategy unsafe-best-match \
		$(foreach url,$(PIP_EXTRA_INDEXES),--extra-index-url $(url)) \
		$(foreach dir,$(PIP_FIND_LINKS_DIRS),--find-links $(dir)) \
		$(if $(UPGRADE),--upgrade) --custom-compile-command "make lock" --quiet -o requirements.lock
	$(BIN)/pip install --quiet -c requirements.lock -e '.[dev]'
	touch $(INSTALLED)

# Exactly what CI runs (.ci/run calls this): lint, format check, the whole suite. Two pytest processes share
# the tests (pytest-xdist); those marked `serial` (they start and kill Ray clusters, nodes and drivers of their
# own) all go to one of them, one after another (--dist loadgroup, tests/conftest.py). Exit code 5 (nothing
# collected) is not a failure. PYTEST_ARGS passes more options.
PYTEST_ARGS ?=
test: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS); rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ] || exit $$rc

# The edit-test loop: lint, then every test not marked `slow` (trains real models or runs whole sweeps) or
# `serial`, on two processes; `make test` before a commit still runs everything.
test-quick: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n 2 -m "not slow and not serial" $(PYTEST_ARGS); rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ] || exit $$rc

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(INSTALLED)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

sweep: $(INSTALLED)
	$(BIN)/sweep run $(SPACE) $(if $(PROFILE),--profile $(PROFILE)) $(if $(SEEDS),--seeds $(SEEDS)) $(if $(TRIALS),--trials $(TRIALS)) --results $(RESULTS) $(LOG_ARGS)

plan: $(INSTALLED)
	$(BIN)/sweep plan $(SPACE) $(if $(PROFILE),--profile $(PROFILE))

spaces: $(INSTALLED)
	$(BIN)/sweep spaces

sql: $(INSTALLED)
	$(BIN)/sweep sql "$(Q)" --results $(RESULTS) $(if $(TOLERANCE),--tolerance $(TOLERANCE))

# Add the missing seeds: make rerun SPACE=… SEEDS=3 [SELECT=near-break] [LOG=mlflow] [RERUN_ARGS=--wait]
# or seeds only where verdicts are open: make rerun SPACE=… SELECT=inconclusive BUDGET=12
SELECT ?= all
RERUN_ARGS ?=
rerun: $(INSTALLED)
	$(BIN)/sweep rerun $(SPACE) $(if $(BUDGET),--budget $(BUDGET),--seeds $(or $(SEEDS),3)) --select $(SELECT) $(if $(PROFILE),--profile $(PROFILE)) --results $(RESULTS) $(LOG_ARGS) $(RERUN_ARGS)

report: $(INSTALLED)
	$(BIN)/sweep report $(SPACE) --results $(RESULTS) $(if $(TOLERANCE),--tolerance $(TOLERANCE))

# Every shipped space's smoke profile, trial by trial, on this machine's GPU (or CPU) without Ray: one process
# per trial, JOBS at a time; rows, logs, GPU utilisation samples and summary.json under GPU_SMOKE_OUT.
# A check of a machine before a sweep spends hours on it (docs/cli.md#checking-a-gpu-machine).
JOBS ?= 4
GPU_SMOKE_OUT ?= /tmp/gpu-smoke
gpu-smoke: $(INSTALLED)
	rm -rf $(GPU_SMOKE_OUT)/configs
	for space in $$($(BIN)/sweep spaces --names --profile smoke); do \
		$(BIN)/sweep plan $$space --profile smoke --write-configs $(GPU_SMOKE_OUT)/configs/$$space >/dev/null || exit 1; done
	$(BIN)/python -m workers.trial_batch $(GPU_SMOKE_OUT)/configs --out $(GPU_SMOKE_OUT) --jobs $(JOBS)

# Known answers (docs/known_answers.md): every search_spaces/known_*.yaml reproduction's cpu profile, into a
# results folder of its own; then, space by space, more seeds only where a claim is still inconclusive (`sweep
# rerun --select expectations`: each round one more seed for each side of each open claim, a decided claim none),
# with the cap and budget declared here before it runs: at most KNOWN_MAX_SEEDS seeds a config and
# KNOWN_BUDGET more trials a space; then the table: each claim, what it found, its verdict, and the seeds each side
# took (a family: the fewest-most over its members). A check users run, not a timed test. Time budget on 2 cores:
# at most about 65 minutes (the cpu profiles' 36 trials, plus at most 4 x KNOWN_BUDGET = 48 adaptive trials).
# Measured 2026-12-06 at load about 4-5: 29 min 15 s for everything but zoology's cpu run and 3 low-rank trials,
# run earlier at load 17-35; so about 35-40 minutes from scratch at that load (13 adaptive trials were spent).
KNOWN_SPACES ?= $(sort $(basename $(notdir $(wildcard search_spaces/known_*.yaml))))
KNOWN_RESULTS ?= results/known
KNOWN_MAX_SEEDS ?= 6
KNOWN_BUDGET ?= 12
KNOWN_TABLE = SELECT e.space, e.name, e.expected, e.found, e.verdict, round(e.delta, 2) AS delta, \
	round(e.delta_lo, 2) AS lo, round(e.delta_hi, 2) AS hi, round(e.a_mean, 2) AS a_mean, m.a_seeds, \
	round(e.b_mean, 2) AS b_mean, m.b_seeds FROM expectations e JOIN (SELECT space, name, \
	CASE WHEN min(n_a) = max(n_a) THEN min(n_a)::VARCHAR ELSE min(n_a) || '-' || max(n_a) END AS a_seeds, \
	CASE WHEN max(b_config) IS NULL THEN '' WHEN min(n_b) = max(n_b) THEN min(n_b)::VARCHAR \
	ELSE min(n_b) || '-' || max(n_b) END AS b_seeds FROM expectation_members GROUP BY ALL) m USING (space, name) \
	ORDER BY e.space, e.name
known-answers: $(INSTALLED)
	for space in $(KNOWN_SPACES); do \
		$(BIN)/sweep run $$space --profile cpu --results $(KNOWN_RESULTS) || exit $$?; \
		$(BIN)/sweep rerun $$space --profile cpu --results $(KNOWN_RESULTS) --select expectations \
			--budget $(KNOWN_BUDGET) --max-seeds $(KNOWN_MAX_SEEDS) || exit $$?; done
	$(BIN)/sweep sql "$(KNOWN_TABLE)" --results $(KNOWN_RESULTS)

# sweep preflight --stand-in-data on every shipped space x profile through the CLI, the GPU profiles against a
# stated 8-GPU node (bench/preflight_shipped.py; about 14 minutes on 2 cores). A check users run, not a timed test.
preflight-shipped: $(INSTALLED)
	$(BIN)/python bench/preflight_shipped.py

# One trial without Ray: make trial CONFIG=path/to/config.json
trial: $(INSTALLED)
	$(BIN)/trial $(CONFIG)

bench: $(INSTALLED)
	$(BIN)/python bench/harness_efficiency.py
	$(BIN)/python bench/kappa_cost.py
	$(BIN)/python bench/trial_efficiency.py
	$(BIN)/python bench/sweep_efficiency.py
	$(BIN)/python bench/analysis_queries.py
	$(BIN)/python bench/analysis_scale.py --source $(RESULTS)
	$(BIN)/python bench/loader_throughput.py
	$(BIN)/python bench/compile_speedup.py
	$(BIN)/python bench/cuda_memory_check.py

# A ViT-B/16 bf16 check of this machine's GPU (memory, throughput, MFU against a matmul peak measured in the same
# run, κ, inference, latency) in a few minutes; without CUDA a reduced CPU check in seconds, which says so.
# Options: make gpu-check GPU_CHECK_ARGS='--compile --json /tmp/gpu_check.json'
gpu-check: $(INSTALLED)
	$(BIN)/python -m workers.gpu_check $(GPU_CHECK_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
