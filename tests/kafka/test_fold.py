"""The fast fold (`sharestate.replay.fold`) against Kafka's own replay, record by record.

The corpus (tests/kafka/replay_corpus/, written by Kafka's ShareCoordinatorShard) holds the state
Kafka has after every record. The fold is fed the decoded records the way Spark feeds it
(sorted by share-partition, segment and log order, in Arrow batches) and every history row
is compared: scalars and counts on every row, the batch list itself wherever the fold emits
it (each segment's last row and each input batch's last row; with one-row batches, that is
every row).
"""

from __future__ import annotations

import pytest

from sharestate.kafka.records import parse_kafka_version
from tests.support.fold import check, fold, fold_input


# The pairwise releases share `combiner.combine` with the reference replay, which
# tests/kafka/test_replay_corpus.py checks on every release; here: 4.0 (its own rules for a state
# an update starts; `make test-slow`, as test_jvm_fold.py checks the fold on its corpus too) and
# 4.4 (the windowed sweep).
@pytest.mark.parametrize("release", [pytest.param("4.0.2", marks=pytest.mark.slow), "4.4.0"])
def test_fold_matches_kafka_on_the_whole_corpus(release: str) -> None:
    kafka = parse_kafka_version(release)
    assert kafka is not None
    rows, expected = fold_input(release, None)
    history = list(fold(rows, 10_000, kafka))
    # The fold numbers segments as the running count of snapshots and tombstones.
    assert [row["segment"] for row in history] == [row["segment"] for row in rows]
    checked, lists = check(iter(history), expected)
    assert checked == len(expected) > 150_000
    assert lists > 2_000  # at least every sequence's final lists


@pytest.mark.parametrize("release", [pytest.param("4.1.2", marks=pytest.mark.slow), "4.4.0"])
def test_fold_batch_lists_match_kafka_after_every_record(release: str) -> None:
    kafka = parse_kafka_version(release)
    assert kafka is not None
    rows, expected = fold_input(release, 150)
    checked, lists = check(fold(rows, 1, kafka), expected)
    assert checked == len(expected) > 5_000
    assert lists == checked - sum(1 for want in expected.values() if want is None)
