#!/usr/bin/env bash
# Regenerates tests/kafka/golden/<kafka-version>/{share_group_state,consumer_offsets}.jsonl with
# Apache Kafka's own serializers (released jars from Maven Central, used as dependencies only).
#
# Usage (from the repo root, or anywhere):
#   bash tests/kafka/kafka_harness/generate_golden.sh              # every release below
#   bash tests/kafka/kafka_harness/generate_golden.sh 4.2.0 4.3.1  # only these
# Environment:
#   MVN            maven command (default: mvn)
#   MVN_OFFLINE=1  pass -o to Maven (everything must already be in the local repository)
#
# Needs Java 17+ and Maven. After one online run, Maven has everything cached and the script
# works offline. Output is deterministic: re-running gives byte-identical files.
set -euo pipefail

RELEASES=(4.0.0 4.0.2 4.1.0 4.1.2 4.2.0 4.2.1 4.3.0 4.3.1 4.4.0)

# shellcheck source=harness_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/harness_lib.sh"
GOLDEN_DIR="$(cd "$HARNESS_DIR/.." && pwd)/golden"

if [[ $# -gt 0 ]]; then
  RELEASES=("$@")
fi

start=$(date +%s)
for version in "${RELEASES[@]}"; do
  build_harness "$version"
  run_harness "$version" golden "$GOLDEN_DIR/$version"
done
echo "done in $(( $(date +%s) - start ))s; golden files under $GOLDEN_DIR" >&2
du -ch "$GOLDEN_DIR"/*/*.jsonl | tail -n1 >&2
