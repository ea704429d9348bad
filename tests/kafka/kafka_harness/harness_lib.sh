# Shared by generate_golden.sh and generate_replay_corpus.sh (sourced, not run): build the
# harness against one Kafka release's jars and run its Main.
# Environment: MVN (default mvn), MVN_OFFLINE=1 to pass -o to Maven.

HARNESS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MVN="${MVN:-mvn}"
MVN_FLAGS=(-q -B -f "$HARNESS_DIR/pom.xml")
if [[ "${MVN_OFFLINE:-0}" == 1 ]]; then
  MVN_FLAGS+=(-o)
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

# Builds the harness for one release into target/kafka-<version>/ and sets HARNESS_CLASSPATH.
build_harness() {
  local version=$1 target jackson
  target="$HARNESS_DIR/target/kafka-$version"
  mkdir -p "$target"
  jackson=$(kafka_jackson_version "$version" "$target")
  echo "== Kafka $version (jackson-databind $jackson)" >&2
  run_mvn -Dkafka.version="$version" -Djackson.version="$jackson" compile dependency:build-classpath
  HARNESS_CLASSPATH="$target/classes:$(cat "$target/classpath.txt")"
  if ! tr ':' '\n' <<<"$HARNESS_CLASSPATH" | grep -q "/jackson-databind-$jackson\.jar$"; then
    echo "jackson-databind $jackson is not on the runtime classpath" >&2
    return 1
  fi
}

# Runs the harness's Main for one release: run_harness VERSION ARGS...
# SLF4J prints a 'no binding' notice on stderr; it is harmless and filtered out.
run_harness() {
  local version=$1
  shift
  java -Dsharestate.kafka.version="$version" -cp "$HARNESS_CLASSPATH" \
    sharestate.harness.Main "$@" 2> >(grep -v '^SLF4J' >&2)
}
