# sharestate: `make run` sets everything up and runs the job on sample data;
# `make test` runs the tests. `make help` lists the rest.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
JARS   := .jars
TEST_JARS := .test-jars
SAMPLE := sample
OUT    := out
export PYSPARK_PYTHON := $(abspath $(PY))
export SHARESTATE_JARS := $(abspath $(JARS))

.PHONY: help setup run test test-connect test-slow test-jvm test-cluster lint fmt docs golden replay-corpus bench dist clean setup-kafka test-kafka

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,local]'
	touch $@

$(JARS)/.fetched: scripts/fetch_jars.sh
	bash scripts/fetch_jars.sh $(JARS)
	touch $@

$(TEST_JARS)/.fetched: scripts/fetch_test_jars.sh $(VENV)/.installed
	bash scripts/fetch_test_jars.sh $(TEST_JARS) $(PY)
	touch $@

# The Python sources of the row contract the jar is built from (sharestate/jvm/contract.py
# renders them into Contract.java): a change to them rebuilds the jar.
JVM_CONTRACT := sharestate/jvm/contract.py sharestate/replay/fold.py sharestate/decode/columns.py \
	sharestate/kafka/constants.py

# The JVM fast paths (decode, fold), compiled against pyspark's own jars: no download.
$(JARS)/sharestate-jvm.jar: $(VENV)/.installed scripts/build_jvm.sh $(JVM_CONTRACT) $(shell find jvm/src/main -name '*.java')
	bash scripts/build_jvm.sh $(PY) $(JARS)

# The local driver JVM's class-data-sharing archive: a small full and incremental run with the
# JVM listing its classes, then Java writes the archive. A jar that changes makes the JVM
# ignore it, so it is written again after any of them.
$(JARS)/driver-classes.jsa: $(VENV)/.installed $(JARS)/.fetched $(JARS)/sharestate-jvm.jar scripts/build_class_archive.py
	$(PY) scripts/build_class_archive.py $(JARS)

setup: $(VENV)/.installed $(JARS)/.fetched $(JARS)/sharestate-jvm.jar $(JARS)/driver-classes.jsa $(TEST_JARS)/.fetched ## virtualenv with the package, Delta and Kafka jars, the JVM fast paths and the driver's class archive in .jars/, JUnit and an HDFS mini-cluster in .test-jars/

run: setup ## generate sample exports, run the job on them (Spark local[*]), show the replayed state
	$(PY) -m sharestate sample --output $(SAMPLE)
	$(PY) -m sharestate replay --share-state $(SAMPLE)/share_state \
		--consumer-offsets $(SAMPLE)/consumer_offsets --output $(OUT) --show 20

lint: setup ## ruff (lint and format check) and mypy
	$(VENV)/bin/ruff check sharestate jobs tests bench notebooks scripts
	$(VENV)/bin/ruff format --check sharestate jobs tests bench notebooks scripts
	$(VENV)/bin/mypy

fmt: setup ## format with ruff
	$(VENV)/bin/ruff format sharestate jobs tests bench notebooks scripts

# The site is generated in part (options from the job's parser, benchmark tables from
# bench/results/), so it builds from the installed package; --strict fails on any warning.
docs: $(VENV)/.installed ## the documentation site (mkdocs, docs/) into site/; a broken link or missing page fails
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

test: setup setup-kafka lint docs test-jvm ## lint, build the docs, the Java tests, every test on a classic session, then the end-to-end tests on a local Spark Connect server (plain, and refusing caching and settings as serverless does)
	$(PY) -m pytest -q
	$(MAKE) --no-print-directory test-connect

# The tests marked `connect` (and `serverless`) on a local Spark Connect server the tests
# start (tests/support/connect_server.py): Spark's default settings, no JVM jar.
test-connect: setup ## only the end-to-end tests on a local Spark Connect server (plain, then refusing caching and settings)
	SHARESTATE_SESSION=connect $(PY) -m pytest -q -m connect
	SHARESTATE_SESSION=serverless $(PY) -m pytest -q -m serverless

# The slower variants of tests `make test` runs (--as-of twice more, Parquet output after a
# failure, duplicated exports through the whole job, the classic session's runs of tests the
# Connect phase runs, Kafka's releases between the oldest and the newest, Delta on HDFS):
# `make test` skips them, saying so.
test-slow: setup ## the tests marked slow: variants of tests that `make test` runs (about 12 minutes)
	SHARESTATE_SLOW=1 $(PY) -m pytest -q -rA -m slow

# About 8 minutes on 2 cores (a standalone cluster, two whole runs on it): not part of `make test`,
# whose pytest run skips it.
test-cluster: setup ## the README's spark-submit command, as written, on a standalone master + 2 workers on 127.0.0.1; every table compared with a local run
	SHARESTATE_CLUSTER=1 $(PY) -m pytest -q -rA --durations=0 tests/cluster/test_cluster.py

test-jvm: $(JARS)/sharestate-jvm.jar $(TEST_JARS)/.fetched ## the JVM fast paths' own tests (JUnit, jvm/src/test/java)
	bash scripts/test_jvm.sh $(PY) $(JARS) $(TEST_JARS)

golden: ## regenerate tests/kafka/golden/ with Kafka's own classes (needs Maven and Java 17)
	bash tests/kafka/kafka_harness/generate_golden.sh

# A single-node Kafka broker and the share-group driver for tests/kafka/test_kafka_broker.py (Maven, once).
KAFKA_BROKER := tests/kafka/kafka_broker/target/kafka-4.4.0/.fetched
$(KAFKA_BROKER): scripts/fetch_kafka.sh tests/kafka/kafka_broker/pom.xml tests/kafka/kafka_broker/dump-log/pom.xml $(wildcard tests/kafka/kafka_broker/src/main/java/sharestate/broker/*.java)
	bash scripts/fetch_kafka.sh

setup-kafka: $(KAFKA_BROKER) ## Kafka 4.4.0 broker jars and the share-group driver, for the broker tests (needs Maven and Java 17)

test-kafka: setup setup-kafka ## only the real-broker tests, including the slow ones (restarts with pruning, kafka:// and Delta re-reads, a run behind a pruned log)
	SHARESTATE_KAFKA_FULL=1 $(PY) -m pytest -q tests/kafka/test_kafka_broker.py tests/kafka/test_follow_kafka.py

replay-corpus: ## regenerate tests/kafka/replay_corpus/ with Kafka's own ShareCoordinatorShard (needs Maven and Java 17)
	bash tests/kafka/kafka_harness/generate_replay_corpus.sh

bench: setup setup-kafka ## decode (N=2000000), replay (R=10000000 records, S=20000 share-partitions; half and double too), the whole job, incremental runs (R and R/4 histories; a Parquet and a Delta export), the job on classic and Spark Connect sessions (1M records), a big increment and a small export (2M and 500k records), increments on local files and on HDFS, following a real broker's share groups
	$(PY) bench/bench_decode.py --records $${N:-2000000}
	$(PY) bench/bench_replay.py --records $${R:-10000000} --share-partitions $${S:-20000}
	$(PY) bench/bench_job.py --records $${R:-10000000} --share-partitions $${S:-20000}
	$(PY) bench/bench_incremental.py --records $${R:-10000000} --share-partitions $${S:-20000}
	$(PY) bench/bench_incremental.py --records $${R:-10000000} --share-partitions $${S:-20000} --export-format delta
	$(PY) bench/bench_sessions.py
	$(PY) bench/bench_shapes.py
	$(PY) bench/bench_streams.py
	$(PY) bench/bench_follow.py

dist: setup ## dist/sharestate.zip for spark-submit --py-files
	mkdir -p dist
	rm -f dist/sharestate.zip
	$(PY) -m zipfile -c dist/sharestate.zip sharestate

clean: ## remove generated data and outputs (keeps .venv and .jars)
	rm -rf $(SAMPLE) $(OUT) bench-data site .pytest_cache .mypy_cache .ruff_cache
