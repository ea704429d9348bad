#!/usr/bin/env bash
# Regenerates tests/kafka/replay_corpus/<kafka-version>/{corpus.jsonl.gz,corpus_stats.json,combiner.jsonl.gz}
# by driving Apache Kafka's own ShareCoordinatorShard and PersisterStateBatchCombiner (released jars
# from Maven Central, used as dependencies only), then compares the combiner across releases
# (tests/kafka/replay_corpus/combiner_comparison.json). See tests/kafka/replay_corpus/README.md.
#
# Usage (from the repo root, or anywhere):
#   bash tests/kafka/kafka_harness/generate_replay_corpus.sh              # every release below
#   bash tests/kafka/kafka_harness/generate_replay_corpus.sh 4.2.1 4.4.0  # only these
# Environment:
#   SEED=932             seed of the corpus and of the combiner cases
#   SEQUENCES=2000       sequences per release
#   COMBINER_CASES=4000  random combiner cases (plus about 60 fixed edge cases)
#   BENCH=1              also run `replay-bench` on each release's corpus and write
#                        tests/kafka/replay_corpus/<release>/replay_bench.json (machine dependent, not deterministic)
#   MVN                  maven command (default: mvn)
#   MVN_OFFLINE=1        pass -o to Maven (everything must already be in the local repository)
#
# Needs Java 17+ and Maven (and python3 for the combiner comparison). Output other than
# replay_bench.json is deterministic: re-running with the same SEED gives byte-identical files.
set -euo pipefail

RELEASES=(4.0.2 4.1.2 4.2.1 4.3.1 4.4.0)

# shellcheck source=harness_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/harness_lib.sh"
CORPUS_DIR="$(cd "$HARNESS_DIR/.." && pwd)/replay_corpus"
SEED="${SEED:-932}"
SEQUENCES="${SEQUENCES:-2000}"
COMBINER_CASES="${COMBINER_CASES:-4000}"
BENCH="${BENCH:-0}"
if [[ $# -gt 0 ]]; then
  RELEASES=("$@")
fi

start=$(date +%s)
for version in "${RELEASES[@]}"; do
  t0=$(date +%s)
  build_harness "$version"
  out="$CORPUS_DIR/$version"
  mkdir -p "$out"
  run_harness "$version" replay-corpus "$out" --seed "$SEED" --sequences "$SEQUENCES"
  run_harness "$version" combiner "$out" --seed "$SEED" --cases "$COMBINER_CASES"
  if [[ "$BENCH" == 1 ]]; then
    run_harness "$version" replay-bench "$out/corpus.jsonl.gz" > "$out/replay_bench.json"
    # Keep the file free of this machine's paths: name the corpus relative to the repository.
    sed -i "s#\"$(cd "$HARNESS_DIR/../../.." && pwd)/#\"#" "$out/replay_bench.json"
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
