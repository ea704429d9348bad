#!/usr/bin/env bash
# Compiles the Java tests (jvm/src/test/java) against the built jar (scripts/build_jvm.sh) and
# the jars pyspark ships, and runs them with the JUnit console launcher
# (scripts/fetch_test_jars.sh). They read Kafka's golden records and combiner cases from
# tests/kafka/ in this repository; nothing downloads.
set -euo pipefail
python=${1:-.venv/bin/python}
jars=${2:-.jars}
test_jars=${3:-.test-jars}
spark_jars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
launcher=$(ls "$test_jars"/junit-platform-console-standalone-*.jar | sort | tail -n 1)
classes=jvm/target/test-classes
rm -rf "$classes"
mkdir -p "$classes"
classpath="$launcher:$jars/sharestate-jvm.jar:$spark_jars/*"
mapfile -t sources < <(find jvm/src/test/java -name '*.java' | sort)
javac --release 17 -Xlint:unchecked -encoding UTF-8 -cp "$classpath" -d "$classes" "${sources[@]}"
java -Dsharestate.repo="$PWD" -cp "$classes:$classpath" org.junit.platform.console.ConsoleLauncher \
  execute --scan-classpath "$classes" --fail-if-no-tests --disable-banner --disable-ansi-colors \
  --details=tree
