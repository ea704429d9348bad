#!/usr/bin/env bash
# Builds the JVM fast paths (jvm/src/main/java) into a jar beside the other runtime jars.
# The row contract with Python (sharestate/jvm/contract.py) is rendered first into
# Contract.java under jvm/target/ (generated at every build, never committed), so the Java
# classes take their column positions and schemas from the Python lists.
# Compiled with javac against the jars pyspark ships, so nothing downloads; the local
# session loads every jar in that folder (sharestate/job/session.py). On a cluster, pass the
# jar to spark-submit with --jars.
set -euo pipefail
python=${1:-.venv/bin/python}
dest=${2:-.jars}
spark_jars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
classes=jvm/target/classes
generated=jvm/target/generated-sources
rm -rf "$classes" "$generated"
mkdir -p "$classes" "$generated/sharestate/jvm" "$dest"
"$python" -m sharestate.jvm "$generated/sharestate/jvm/Contract.java"
mapfile -t sources < <(find jvm/src/main/java "$generated" -name '*.java' | sort)
javac --release 17 -Xlint:unchecked -nowarn -encoding UTF-8 -cp "$spark_jars/*" -d "$classes" "${sources[@]}"
jar --create --file "$dest/sharestate-jvm.jar" -C "$classes" .
echo "built $dest/sharestate-jvm.jar (${#sources[@]} sources)"
