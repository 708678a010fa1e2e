# Every target installs what it needs into .venv first, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

SPACE ?= mqar_recall
PROFILE ?=
SEEDS ?=
RESULTS ?= results
Q ?= SELECT space, status, count(*) AS trials FROM trials GROUP BY ALL ORDER BY ALL
# One tolerance for every verdict, in the metric's units (make sql/report TOLERANCE=0.3); empty: each space's own
TOLERANCE ?=

.PHONY: install test lint format sweep plan spaces sql report rerun bench trial clean

install: $(INSTALLED)

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(INSTALLED)

# Exactly what CI runs (.ci/run calls this): lint, format check, the whole suite.
test: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(INSTALLED)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

sweep: $(INSTALLED)
	$(BIN)/sweep run $(SPACE) $(if $(PROFILE),--profile $(PROFILE)) $(if $(SEEDS),--seeds $(SEEDS)) --results $(RESULTS)

plan: $(INSTALLED)
	$(BIN)/sweep plan $(SPACE) $(if $(PROFILE),--profile $(PROFILE))

spaces: $(INSTALLED)
	$(BIN)/sweep spaces

sql: $(INSTALLED)
	$(BIN)/sweep sql "$(Q)" --results $(RESULTS) $(if $(TOLERANCE),--tolerance $(TOLERANCE))

# Add the missing seeds: make rerun SPACE=… SEEDS=3 [SELECT=near-break] [RERUN_ARGS=--wait]
# or seeds only where verdicts are open: make rerun SPACE=… SELECT=inconclusive BUDGET=12
SELECT ?= all
RERUN_ARGS ?=
rerun: $(INSTALLED)
	$(BIN)/sweep rerun $(SPACE) $(if $(BUDGET),--budget $(BUDGET),--seeds $(or $(SEEDS),3)) --select $(SELECT) $(if $(PROFILE),--profile $(PROFILE)) --results $(RESULTS) $(RERUN_ARGS)

report: $(INSTALLED)
	$(BIN)/sweep report $(SPACE) --results $(RESULTS) $(if $(TOLERANCE),--tolerance $(TOLERANCE))

# One trial without Ray: make trial CONFIG=path/to/config.json
trial: $(INSTALLED)
	$(BIN)/trial $(CONFIG)

bench: $(INSTALLED)
	$(BIN)/python bench/harness_efficiency.py
	$(BIN)/python bench/kappa_cost.py
	$(BIN)/python bench/sweep_efficiency.py
	$(BIN)/python bench/analysis_queries.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
