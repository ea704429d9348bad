#!/usr/bin/env bash
# Regenerates tests/golden/<kafka-version>/{share_group_state,consumer_offsets}.jsonl with
# Apache Kafka's own serializers (released jars from Maven Central, used as dependencies only).
#
# Usage (from the repo root, or anywhere):
#   bash tests/kafka_harness/generate_golden.sh              # every release below
#   bash tests/kafka_harness/generate_golden.sh 4.2.0 4.3.1  # only these
# Environment:
#   MVN            maven command (default: mvn)
#   MVN_OFFLINE=1  pass -o to Maven (everything must already be in the local repository)
#
# Needs Java 17+ and Maven. After one online run, Maven has everything cached and the script
# works offline. Output is deterministic: re-running gives byte-identical files.
set -euo pipefail

RELEASES=(4.0.0 4.0.2 4.1.0 4.1.2 4.2.0 4.2.1 4.3.0 4.3.1 4.4.0)

HARNESS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GOLDEN_DIR="$(cd "$HARNESS_DIR/.." && pwd)/golden"
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

# Kafka's POMs declare Jackson with runtime scope, so the harness declares jackson-databind itself.
# To run on exactly the Jackson that Kafka release uses, read its version from the published POM
# of kafka-share-coordinator (found next to the jar on the resolved classpath).
kafka_jackson_version() {
  local version=$1 target=$2 pom
  run_mvn -Dkafka.version="$version" dependency:build-classpath -Dmdep.outputFile="$target/kafka-classpath.txt"
  pom=$(tr ':' '\n' < "$target/kafka-classpath.txt" | grep "/kafka-share-coordinator-$version\.jar$" | sed 's/\.jar$/.pom/')
  [[ -f "$pom" ]] || { echo "cannot find kafka-share-coordinator-$version.pom" >&2; return 1; }
  grep -A1 '<artifactId>jackson-databind</artifactId>' "$pom" | sed -n 's:.*<version>\(.*\)</version>.*:\1:p' | head -n1
}

start=$(date +%s)
for version in "${RELEASES[@]}"; do
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
  # SLF4J prints a 'no binding' notice on stderr; it is harmless and filtered out.
  java -Dsharestate.kafka.version="$version" -cp "$classpath" \
    sharestate.harness.Main golden "$GOLDEN_DIR/$version" 2> >(grep -v '^SLF4J' >&2)
done
echo "done in $(( $(date +%s) - start ))s; golden files under $GOLDEN_DIR" >&2
du -ch "$GOLDEN_DIR"/*/*.jsonl | tail -n1 >&2
