#!/usr/bin/env bash
# Copies the runtime jars the local Spark session loads beyond pyspark's own (Delta Lake and
# the Spark Kafka source) from Maven Central into a local folder, once, at set-up.
# Artifacts are listed one by one, without transitive resolution: Spark's parent POM names a
# mirror repository these machines cannot reach, and pyspark already ships everything else.
set -euo pipefail
dest=${1:-.jars}
mkdir -p "$dest"
# Keep in step with pyproject.toml (pyspark 4.2.0, delta-spark 4.4.0). Maven Central has no
# delta-spark 4.4.1 jar and no spark-token-provider-kafka newer than 4.0.0 (checked 2026-11):
# hence Delta 4.4.0 on both sides and the 4.0.0 token provider (used only for delegation tokens).
artifacts=(
  io.delta:delta-spark_4.2_2.13:4.4.0
  io.delta:delta-storage:4.4.0
  org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0
  org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.0.0
  org.apache.kafka:kafka-clients:3.9.2
  org.apache.commons:commons-pool2:2.13.1
)
for gav in "${artifacts[@]}"; do
  IFS=: read -r group artifact version <<<"$gav"
  if [ -f "$dest/$artifact-$version.jar" ]; then continue; fi
  mvn -q -B -U dependency:copy -Dartifact="$gav" -DoutputDirectory="$dest" -Dmdep.overWriteReleases=false
done
echo "jars in $dest: $(ls "$dest"/*.jar | wc -l)"
