# sharestate: `make run` sets everything up and runs the job on sample data;
# `make test` runs the tests. `make help` lists the rest.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
JARS   := .jars
SAMPLE := sample
OUT    := out
export PYSPARK_PYTHON := $(abspath $(PY))
export SHARESTATE_JARS := $(abspath $(JARS))

.PHONY: help setup run test lint fmt golden replay-corpus bench dist clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

$(JARS)/.fetched: scripts/fetch_jars.sh
	bash scripts/fetch_jars.sh $(JARS)
	touch $@

setup: $(VENV)/.installed $(JARS)/.fetched ## virtualenv with the package, Delta and Kafka jars in .jars/

run: setup ## generate sample exports, run the job on them (Spark local[*]), show the replayed state
	$(PY) -m sharestate sample --output $(SAMPLE)
	$(PY) -m sharestate replay --share-state $(SAMPLE)/share_state \
		--consumer-offsets $(SAMPLE)/consumer_offsets --output $(OUT) --show 20

lint: setup ## ruff and mypy
	$(VENV)/bin/ruff check sharestate jobs tests bench
	$(VENV)/bin/mypy

fmt: setup ## format with ruff
	$(VENV)/bin/ruff format sharestate jobs tests bench

test: setup lint ## lint, then every test (golden files are committed; no Maven needed)
	$(PY) -m pytest -q

golden: ## regenerate tests/golden/ with Kafka's own classes (needs Maven and Java 17)
	bash tests/kafka_harness/generate_golden.sh

replay-corpus: ## regenerate tests/replay_corpus/ with Kafka's own ShareCoordinatorShard (needs Maven and Java 17)
	bash tests/kafka_harness/generate_replay_corpus.sh

bench: setup ## decode benchmark: scan vs our decode vs a row-at-a-time UDF (N=2000000)
	$(PY) bench/bench_decode.py --records $${N:-2000000}

dist: setup ## dist/sharestate.zip for spark-submit --py-files
	mkdir -p dist
	rm -f dist/sharestate.zip
	$(PY) -m zipfile -c dist/sharestate.zip sharestate

clean: ## remove generated data and outputs (keeps .venv and .jars)
	rm -rf $(SAMPLE) $(OUT) bench-data .pytest_cache .mypy_cache .ruff_cache
