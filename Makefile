# The two commands of the README: `make serve` starts a single-node controller, `make test` runs
# the whole test suite. Both create the virtual environment on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install serve lint interop test sim bench bench-docs clean

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

# Real Apache RocketMQ for tests/interop (docs/interop.md): the pinned release's jars (Maven
# Central, into MVN_REPO, outside git) and the Producer/Consumer programs, compiled into
# interop/java/target (ignored); target/classpath.txt lists the jars. Does nothing when the stamp is
# newer than the pom and the sources; the first run on a fresh machine downloads ~125 MB.
MVN_REPO ?= $(HOME)/.cache/rmqc-interop/m2
INTEROP := interop/java
INTEROP_STAMP := $(INTEROP)/target/.built
$(INTEROP_STAMP): $(INTEROP)/pom.xml $(wildcard $(INTEROP)/src/main/java/org/rmqc/interop/*.java $(INTEROP)/src/main/resources/*)
	cd $(INTEROP) && mvn -B -q -Dmaven.repo.local=$(MVN_REPO) compile dependency:build-classpath \
		-Dmdep.outputFile=target/classpath.txt
	touch $@

interop: $(INTEROP_STAMP)

# the whole suite: lint, the tests, then 300 seeds of the deterministic simulator and 200 of its
# corruption profile (damaged and short disks; ~35 s of CPU, about what the 300 take), and 100 of
# the disks profile (disks that fill up or fail a write while the node runs; ~15 s)
test: deps lint interop
	$(BIN)/python -m pytest
	$(BIN)/python -m rmqc.testing.sim --seeds 300
	$(BIN)/python -m rmqc.testing.sim --profile corruption --seeds 200
	$(BIN)/python -m rmqc.testing.sim --profile disks --seeds 100

# what the suite needs beyond .venv (a Java runtime, faketime, e2fsprogs): apt-get, only when missing
.PHONY: deps
deps:
	scripts/install-test-deps.sh

sim: $(STAMP)
	$(BIN)/python -m rmqc.testing.sim --seeds 10000

# docs/benchmarks.md's results section (its targets table, write and read points and the history
# of runs) regenerated from one run's results.json: make bench-docs RUN=bench-out/<run>
bench-docs: $(STAMP)
	@test -n "$(RUN)" || { echo "usage: make bench-docs RUN=bench-out/<run> (a folder with results.json)" >&2; exit 2; }
	$(BIN)/python -m bench docs $(RUN)

# also what the README's walkthrough writes (rmqc dev cluster, rmqc sim, log export, analyze)
clean:
	rm -rf $(VENV) $(INTEROP)/target rmqc-data bench-out .pytest_cache .hypothesis .mypy_cache .ruff_cache rmqc-dev rmqc-sim analysis *.parquet chaos-out
