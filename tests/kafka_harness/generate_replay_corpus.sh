#!/usr/bin/env bash
# Regenerates tests/replay_corpus/<kafka-version>/{corpus.jsonl.gz,corpus_stats.json,combiner.jsonl.gz}
# by driving Apache Kafka's own ShareCoordinatorShard and PersisterStateBatchCombiner (released jars
# from Maven Central, used as dependencies only), then compares the combiner across releases
# (tests/replay_corpus/combiner_comparison.json). See tests/replay_corpus/README.md.
#
# Usage (from the repo root, or anywhere):
#   bash tests/kafka_harness/generate_replay_corpus.sh              # every release below
#   bash tests/kafka_harness/generate_replay_corpus.sh 4.2.1 4.4.0  # only these
# Environment:
#   SEED=932             seed of the corpus and of the combiner cases
#   SEQUENCES=2000       sequences per release
#   COMBINER_CASES=4000  random combiner cases (plus about 60 fixed edge cases)
#   BENCH=1              also run `replay-bench` on each release's corpus and write
#                        tests/replay_corpus/<release>/replay_bench.json (machine dependent, not deterministic)
#   MVN                  maven command (default: mvn)
#   MVN_OFFLINE=1        pass -o to Maven (everything must already be in the local repository)
#
# Needs Java 17+ and Maven (and python3 for the combiner comparison). Output other than
# replay_bench.json is deterministic: re-running with the same SEED gives byte-identical files.
set -euo pipefail

RELEASES=(4.0.2 4.1.2 4.2.1 4.3.1 4.4.0)

HARNESS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CORPUS_DIR="$(cd "$HARNESS_DIR/.." && pwd)/replay_corpus"
SEED="${SEED:-932}"
SEQUENCES="${SEQUENCES:-2000}"
COMBINER_CASES="${COMBINER_CASES:-4000}"
BENCH="${BENCH:-0}"
MVN="${MVN:-mvn}"
MVN_FLAGS=(-q -B -f "$HARNESS_DIR/pom.xml")
if [[ "${MVN_OFFLINE:-0}" == 1 ]]; then
  MVN_FLAGS+=(-o)
fi

if [[ $# -gt 0 ]]; then
  RELEASES=("$@")
fi

# Runs Maven quietly; its output (errors only, with -q) goes to stderr, minus stray ANSI codes.
run_mvn() {
  "$MVN" "${MVN_FLAGS[@]}" "$@" 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' -e '/^[[:space:]]*$/d' >&2
}

# Same as generate_golden.sh: run on exactly the jackson-databind version the Kafka release uses,
# read from the published POM of kafka-share-coordinator.
kafka_jackson_version() {
  local version=$1 target=$2 pom
  run_mvn -Dkafka.version="$version" dependency:build-classpath -Dmdep.outputFile="$target/kafka-classpath.txt"
  pom=$(tr ':' '\n' < "$target/kafka-classpath.txt" | grep "/kafka-share-coordinator-$version\.jar$" | sed 's/\.jar$/.pom/')
  [[ -f "$pom" ]] || { echo "cannot find kafka-share-coordinator-$version.pom" >&2; return 1; }
  grep -A1 '<artifactId>jackson-databind</artifactId>' "$pom" | sed -n 's:.*<version>\(.*\)</version>.*:\1:p' | head -n1
}

start=$(date +%s)
for version in "${RELEASES[@]}"; do
  t0=$(date +%s)
  target="$HARNESS_DIR/target/kafka-$version"
  mkdir -p "$target"
  jackson=$(kafka_jackson_version "$version" "$target")
  echo "== Kafka $version (jackson-databind $jackson)" >&2
  run_mvn -Dkafka.version="$version" -Djackson.version="$jackson" compile dependency:build-classpath
  classpath="$target/classes:$(cat "$target/classpath.txt")"
  if ! tr ':' '\n' <<<"$classpath" | grep -q "/jackson-databind-$jackson\.jar$"; then
    echo "jackson-databind $jackson is not on the runtime classpath" >&2
    exit 1
  fi
  out="$CORPUS_DIR/$version"
  mkdir -p "$out"
  # SLF4J prints a 'no binding' notice on stderr; it is harmless and filtered out.
  java -Dsharestate.kafka.version="$version" -cp "$classpath" \
    sharestate.harness.Main replay-corpus "$out" --seed "$SEED" --sequences "$SEQUENCES" 2> >(grep -v '^SLF4J' >&2)
  java -Dsharestate.kafka.version="$version" -cp "$classpath" \
    sharestate.harness.Main combiner "$out" --seed "$SEED" --cases "$COMBINER_CASES" 2> >(grep -v '^SLF4J' >&2)
  if [[ "$BENCH" == 1 ]]; then
    java -Dsharestate.kafka.version="$version" -cp "$classpath" \
      sharestate.harness.Main replay-bench "$out/corpus.jsonl.gz" > "$out/replay_bench.json" 2> >(grep -v '^SLF4J' >&2)
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("   replay rate:", d["replay_only"]["records_per_sec_median"], "records/s (replay only),", d["deserialize_and_replay"]["records_per_sec_median"], "records/s (deserialize + replay)")' "$out/replay_bench.json" >&2
  fi
  echo "   $version done in $(( $(date +%s) - t0 ))s" >&2
done

# Compare the combiner outputs of every release present (inputs are identical for the same SEED).
present=()
for d in "$CORPUS_DIR"/*/combiner.jsonl.gz; do
  present+=("$(basename "$(dirname "$d")")")
done
if [[ ${#present[@]} -ge 2 ]]; then
  mapfile -t present < <(printf '%s\n' "${present[@]}" | sort -V)
  if ! python3 "$HARNESS_DIR/compare_combiner.py" "$CORPUS_DIR" "${present[@]}" --out "$CORPUS_DIR/combiner_comparison.json"; then
    echo "combiner comparison failed (were all releases generated with the same SEED and COMBINER_CASES?)" >&2
    exit 1
  fi
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
for k, v in d["comparisons"].items(): print("  combiner", k, v["counts"])' "$CORPUS_DIR/combiner_comparison.json" >&2
fi
echo "done in $(( $(date +%s) - start ))s; corpus under $CORPUS_DIR" >&2
du -ch "$CORPUS_DIR"/*/*.gz | tail -n1 >&2
