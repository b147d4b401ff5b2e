# The two commands of the README: `make serve` starts a single-node controller, `make test` runs
# the whole test suite. Both create the virtual environment on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install serve lint test sim bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/rmqc serve

# ruff and mypy first (seconds; their configuration is in pyproject.toml), then the suite
lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/mypy

# the whole suite: lint, the tests, then 300 seeds of the deterministic simulator (issue 14), and 200
# of its corruption profile (damaged and short disks; ~35 s of CPU, about what the 300 take)
test: deps lint
	$(BIN)/python -m pytest
	$(BIN)/python -m rmqc.testing.sim --seeds 300
	$(BIN)/python -m rmqc.testing.sim --profile corruption --seeds 200

# what the suite needs beyond .venv (a Java runtime, faketime, e2fsprogs): apt-get, only when missing
.PHONY: deps
deps:
	scripts/install-test-deps.sh

sim: $(STAMP)
	$(BIN)/python -m rmqc.testing.sim --seeds 10000

# also what the README's walkthrough writes (rmqc dev cluster, rmqc sim, log export, analyze)
clean:
	rm -rf $(VENV) rmqc-data bench-out .pytest_cache .hypothesis .mypy_cache .ruff_cache rmqc-dev rmqc-sim analysis *.parquet
