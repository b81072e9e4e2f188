# The two commands of the README: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# pytest-xdist workers for `make test`: three per two cores. The tests wait on the processes they start (CLI
# commands, agents, a browser), and the third worker keeps both cores busy meanwhile (docs/performance.md).
WORKERS ?= $(shell $(PYTHON) -c 'import os; print(max(2, 3 * (os.cpu_count() or 2) // 2))')

# Property tests (Hypothesis) draw from a fresh seed each run, printed; HYPOTHESIS_SEED=N draws that run's examples again
HYPOTHESIS_SEED ?= $(shell $(PYTHON) -c 'import random; print(random.randrange(1 << 32))')
HYPOTHESIS_SEED := $(HYPOTHESIS_SEED)

.PHONY: demo lint test e2e fuzz coverage bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "otel-replay needs Python >= 3.10 (set PYTHON=...)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/otel-replay demo

# the quality gates, before any test: lint and format, types, the one-way import contract (pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	@sh scripts/ensure-chromium
	@sh scripts/ensure-node-packages
	@# the suite starts hundreds of CLI and agent processes; with PYTHONDONTWRITEBYTECODE set none of them
	@# would cache the package's bytecode, and each would compile it again (~0.2 s per process)
	$(BIN)/python -m compileall -q otel_replay
	@echo "property tests: Hypothesis profile ci, seed $(HYPOTHESIS_SEED) (again: make test HYPOTHESIS_SEED=$(HYPOTHESIS_SEED))"
	$(BIN)/python -m pytest -q -n $(WORKERS) --dist worksteal --hypothesis-profile=ci --hypothesis-seed=$(HYPOTHESIS_SEED)

# the end-to-end stage (e2e/, docs/testing.md): the installed otel-replay console script and agent programs, each
# a fresh process (no fork server) with its own PYTHONHASHSEED, drawn from a base seed the header prints (again:
# make e2e E2E_SEED=N)
e2e: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist worksteal -p no:cacheprovider e2e

# the property tests alone (marker "hypothesis"), ten times their examples each (profile fuzz), from a printed seed
fuzz: $(STAMP)
	@echo "property tests: Hypothesis profile fuzz, seed $(HYPOTHESIS_SEED) (again: make fuzz HYPOTHESIS_SEED=$(HYPOTHESIS_SEED))"
	$(BIN)/python -m pytest -q -n $(WORKERS) --dist worksteal -m hypothesis --hypothesis-profile=fuzz --hypothesis-seed=$(HYPOTHESIS_SEED)

# the suite under coverage (installs coverage and pytest-cov into .venv; pytest-cov combines the workers' and
# the subprocesses' data), then the modules and public functions it never executed (scripts/unexecuted.py;
# exit 1 when there are any)
coverage: $(STAMP)
	$(BIN)/python -m pip install --quiet 'coverage>=7.10' 'pytest-cov>=6'
	rm -rf .coverage-data && mkdir .coverage-data
	COVERAGE_FILE=$(CURDIR)/.coverage-data/coverage $(BIN)/python -m pytest -q -n auto --dist worksteal --cov --cov-report=
	COVERAGE_FILE=$(CURDIR)/.coverage-data/coverage $(BIN)/python -m coverage json -q -o .coverage-data/coverage.json
	$(BIN)/python scripts/unexecuted.py .coverage-data/coverage.json

bench: $(STAMP)
	@# runs every benchmark, then prints the table of docs/performance.md with this run's figures; a benchmark
	@# exits 1 when it misses a goal, the runner then does too, and "-" lets make report it as ignored
	-$(BIN)/python benchmarks/_table.py

clean:
	rm -rf $(VENV) .venv-mcp1 build *.egg-info
