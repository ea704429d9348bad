#!/usr/bin/env bash
# Set-up for tests/kafka/test_kafka_broker.py: resolves a single-node Kafka broker (kafka_2.13 and its
# runtime dependencies, Maven Central releases) and builds the share-group driver, once, into
# tests/kafka/kafka_broker/target/kafka-<version>/ (classes + classpath.txt). For releases whose
# DumpLogSegments lives in kafka-tools (4.3+), also tests/kafka/kafka_broker/dump-log/target/tools-<v>/.
# Nothing is downloaded when the tests run.
#
# Usage: bash scripts/fetch_kafka.sh [VERSION...]     (default: 4.4.0)
# Environment: MVN (default mvn), MVN_OFFLINE=1 to pass -o to Maven.
# Needs Java 17+ and Maven.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BROKER_DIR="$ROOT/tests/kafka/kafka_broker"
MVN="${MVN:-mvn}"
MVN_FLAGS=(-q -B)
if [[ "${MVN_OFFLINE:-0}" == 1 ]]; then
  MVN_FLAGS+=(-o)
fi
RELEASES=("$@")
if [[ ${#RELEASES[@]} -eq 0 ]]; then
  RELEASES=(4.4.0)
fi

run_mvn() {
  "$MVN" "${MVN_FLAGS[@]}" "$@" 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' -e '/^[[:space:]]*$/d' >&2
}

# The release whose kafka-tools / kafka-tools-api jars go with a broker release. Maven Central
# has neither kafka-tools nor kafka-tools-api 4.4.0 (checked 2026-11), so 4.4.0 uses 4.3.1's.
tools_version() {
  case "$1" in
    4.4.0) echo 4.3.1 ;;
    *) echo "$1" ;;
  esac
}

# DumpLogSegments moved from core (kafka.tools) to kafka-tools (org.apache.kafka.tools) in 4.3.
needs_tools_build() {
  local major minor
  IFS=. read -r major minor _ <<<"$1"
  (( major > 4 || (major == 4 && minor >= 3) ))
}

# The log4j-core version a Kafka release depends on, read from its kafka-server POM (found next
# to the jar on a resolved classpath): the SLF4J binding is declared at that version.
log4j_version() {
  local classpath_file=$1 version=$2 pom
  pom=$(tr ':' '\n' < "$classpath_file" | grep "/kafka-server-$version\.jar$" | sed 's/\.jar$/.pom/')
  [[ -f "$pom" ]] || { echo "cannot find kafka-server-$version.pom" >&2; return 1; }
  grep -A1 '<artifactId>log4j-core</artifactId>' "$pom" | sed -n 's:.*<version>\(.*\)</version>.*:\1:p' | head -n1
}

start=$(date +%s)
for version in "${RELEASES[@]}"; do
  tools=$(tools_version "$version")
  target="$BROKER_DIR/target/kafka-$version"
  echo "== Kafka $version broker and driver (kafka-tools-api $tools)" >&2
  props=(-f "$BROKER_DIR/pom.xml" -Dkafka.version="$version" -Dkafka.tools.version="$tools")
  run_mvn "${props[@]}" dependency:build-classpath
  log4j=$(log4j_version "$target/classpath.txt" "$version")
  run_mvn "${props[@]}" -Dlog4j.version="$log4j" compile dependency:build-classpath
  if needs_tools_build "$tools"; then
    echo "== Kafka $tools DumpLogSegments (kafka-tools)" >&2
    tools_props=(-f "$BROKER_DIR/dump-log/pom.xml" -Dkafka.tools.version="$tools")
    run_mvn "${tools_props[@]}" dependency:build-classpath
    log4j=$(log4j_version "$BROKER_DIR/dump-log/target/tools-$tools/classpath.txt" "$tools")
    run_mvn "${tools_props[@]}" -Dlog4j.version="$log4j" dependency:build-classpath
    echo "$tools" > "$target/dump-log-version.txt"
  else
    rm -f "$target/dump-log-version.txt"
  fi
  touch "$target/.fetched"
done
echo "Kafka broker classpaths ready in $(( $(date +%s) - start ))s under $BROKER_DIR/target" >&2
