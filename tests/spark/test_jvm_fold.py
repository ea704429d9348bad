"""The JVM fold (`sharestate.jvm.Fold`, built by scripts/build_jvm.sh) against the Python
fold (`sharestate.replay.fold`, the reference) and Kafka's own replay.

The JVM fold computes the same columns; the one allowed difference is that it sets
`state_batches` on each segment's last row only (Python also sets it on the last row of
each Arrow batch it is given).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from sharestate import jvm
from sharestate.decode.columns import KEY, LOG_ORDER
from sharestate.errors import SparkSetupError
from sharestate.job.config import JobConfig
from sharestate.job.pipeline import compute
from sharestate.kafka.records import parse_kafka_version
from sharestate.replay import replay
from sharestate.replay.fold import HISTORY_FIELDS
from sharestate.sample.exports import KAFKA_EXPORT_SCHEMA
from sharestate.sample.simulate import SimulationSpec, simulate, write_export
from tests.support.corpus import RELEASES, hex_bytes
from tests.support.fold import INPUT_SCHEMA, check, fold, fold_input
from tests.support.paths import GOLDEN

pytestmark = pytest.mark.spark

#: Sequences of each release's corpus folded here (of 2,000; the Python fold's own test
#: takes the whole corpus of two releases).
CORPUS_SEQUENCES = 200


@pytest.fixture(scope="module")
def jvm_spark(spark: SparkSession) -> SparkSession:
    if not jvm.available(spark):
        pytest.skip("sharestate-jvm.jar is not in .jars/: run `bash scripts/build_jvm.sh`")
    return spark


def _jvm_fold(spark: SparkSession, rows: list[dict[str, Any]], kafka: tuple[int, int]) -> Any:
    """The rows through Spark the way replay() feeds the fold, then `Fold.fold`."""
    table = pa.Table.from_pylist(rows, schema=INPUT_SCHEMA)
    ordered = (
        spark.createDataFrame(table).repartition(4, *KEY).sortWithinPartitions(*KEY, *LOG_ORDER)
    )
    (folded, _), tee = jvm.call_teed(spark, "Fold", "fold", ordered, kafka[0], kafka[1])
    assert folded.schema == from_arrow_schema(pa.schema(HISTORY_FIELDS))
    rows = folded.toArrow().to_pylist()
    tee.unpersist()
    return rows


def test_output_schema_is_history_fields(jvm_spark: SparkSession) -> None:
    schema = jvm_spark._jvm.sharestate.jvm.Fold.HISTORY.json()  # type: ignore[union-attr]
    assert json.loads(schema) == json.loads(from_arrow_schema(pa.schema(HISTORY_FIELDS)).json())


@pytest.mark.parametrize("release", RELEASES)
def test_jvm_fold_equals_python_fold_and_kafka(jvm_spark: SparkSession, release: str) -> None:
    kafka = parse_kafka_version(release)
    assert kafka is not None
    rows, expected = fold_input(release, CORPUS_SEQUENCES)
    got = _jvm_fold(jvm_spark, rows, kafka)
    want = {(r["source_partition"], r["source_offset"]): r for r in fold(rows, 10_000, kafka)}
    assert len(got) == len(want) == len(rows)
    segments = {(r["group_id"], r["topic_id"], r["partition"], r["segment"]) for r in rows}
    listed = 0
    for row in got:
        reference = want[(row["source_partition"], row["source_offset"])]
        batches = row["state_batches"]
        assert {**row, "state_batches": None} == {**reference, "state_batches": None}
        if batches is not None:
            listed += 1
            assert batches == reference["state_batches"], row
    assert listed == len(segments)  # every segment's last row, nothing else
    checked, lists = check(iter(got), expected)
    assert checked == len(expected) > 1_000 and lists > 0


def _records(spark: SparkSession, path: Path, release: str = "4.4.0") -> DataFrame:
    config = JobConfig(share_state=str(path), kafka_version=release)
    return compute(spark, config).share_state_records.cache()


@pytest.fixture(scope="module")
def simulated(jvm_spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> DataFrame:
    spec = SimulationSpec(
        records=3_000, share_partitions=50, skew=1.3, records_per_snapshot=25, workers=1
    )
    path = tmp_path_factory.mktemp("simulated") / "share_state"
    write_export(simulate(spec), path, files=3)
    return _records(jvm_spark, path)


def _equal(got: DataFrame, want: DataFrame) -> None:
    assert_df_equality(got, want, ignore_row_order=True)


@pytest.mark.parametrize("kafka", [(4, 4), (4, 1)])
def test_jvm_replay_equals_python_replay(simulated: DataFrame, kafka: tuple[int, int]) -> None:
    on_jvm = replay(simulated, kafka, engine="jvm")
    on_python = replay(simulated, kafka, engine="python")
    assert on_jvm.history.count() == simulated.count() > 2_000
    _equal(on_jvm.history, on_python.history)
    _equal(on_jvm.state, on_python.state)
    # The fold's full output: state_batches only where the JVM fold sets it.
    with_lists = on_jvm.folded.filter(F.col("state_batches").isNotNull())
    where = [*KEY, *LOG_ORDER]
    python_lists = on_python.folded.join(with_lists.select(*where), where, "left_semi")
    _equal(with_lists, python_lists.select(*with_lists.columns))


def test_state_is_left_behind_by_the_history_pass(simulated: DataFrame) -> None:
    """The JVM state's rows come from the pass that folds the history (`sharestate.jvm.Tee`),
    or, where that pass has not run, from folding again: the same rows either way."""
    spark = simulated.sparkSession
    # Two fold partitions (the session's shuffle partitions), not coalesced into one.
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    try:
        alone = replay(simulated, engine="jvm")
        teed = replay(simulated, engine="jvm")
    finally:
        spark.conf.unset("spark.sql.adaptive.coalescePartitions.enabled")
    assert alone.tee is not None and alone.tee.cached_partitions() == 0
    alone_state = alone.state.collect()  # nothing left behind: folds again
    assert teed.tee is not None
    teed.history.write.format("noop").mode("overwrite").save()
    partitions = teed.folded.rdd.getNumPartitions()
    assert partitions == 2
    assert teed.tee.cached_partitions() == partitions  # before the state is computed
    assert sorted(teed.state.collect()) == sorted(alone_state)
    assert len(alone_state) == simulated.select(*KEY).distinct().count()
    for tee in (alone.tee, teed.tee):
        tee.unpersist()
        assert tee.cached_partitions() == 0


def test_jvm_replay_from_a_stored_state(simulated: DataFrame) -> None:
    """Incremental runs: each engine goes on from the state it stored (seed rows)."""
    cut = F.col("source_offset") < F.lit(60)
    first_python = replay(simulated.filter(cut), engine="python")
    first_jvm = replay(simulated.filter(cut), engine="jvm")
    _equal(first_jvm.state, first_python.state)
    later = simulated.filter(~cut)
    second_jvm = replay(later, prior_state=first_jvm.state, engine="jvm")
    second_python = replay(later, prior_state=first_python.state, engine="python")
    assert second_jvm.state.count() > 10
    _equal(second_jvm.state, second_python.state)
    _equal(second_jvm.history, second_python.history)


def _golden_with_impossible_batches(path: Path) -> Path:
    """Kafka 4.3.1's golden records (some with batches that end before they start) as an
    export, plus updates with overlapping and reversed batches on one share-partition,
    including offsets near Long.MIN/MAX_VALUE (both folds wrap as Java's long does)."""
    from sharestate.sample import encode

    golden = GOLDEN / "4.3.1" / "share_group_state.jsonl"
    rows: list[dict[str, Any]] = []
    for offset, line in enumerate(golden.read_text(encoding="utf-8").splitlines()):
        record = json.loads(line)
        key, value = hex_bytes(record["key_hex"]), hex_bytes(record["value_hex"])
        rows.append(
            {
                "key": key,
                "value": value,
                "topic": "__share_group_state",
                "partition": 0,
                "offset": offset,
                "timestamp": None,
                "timestampType": 0,
                "headers": [],
            }
        )
    topic = "Uj5wn_FqTXirEASvVZRY1w"
    updates = [
        [(1, 10, 0, 1), (5, 20, 2, 1)],
        [(30, 25, 0, 1)],
        [(3, 8, 4, 2), (7, 4, 0, 3), (6, 6, 2, 2)],
        [(40, 45, 2, 1), (44, 50, 0, 1), (50, 39, 4, 1)],
    ]
    for step, batches in enumerate(updates):
        rows.append(
            {
                "key": encode.share_state_key(1, "impossible", topic, 3),
                "value": encode.share_update_value(
                    snapshot_epoch=0, leader_epoch=1, start_offset=-1, batches=batches
                ),
                "topic": "__share_group_state",
                "partition": 1,
                "offset": step,
                "timestamp": None,
                "timestampType": 0,
                "headers": [],
            }
        )
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=KAFKA_EXPORT_SCHEMA), path / "part-0.parquet")
    return path


@pytest.mark.parametrize("kafka", [(4, 3), (4, 4)])
def test_impossible_batches_give_the_same_errors(
    jvm_spark: SparkSession, tmp_path: Path, kafka: tuple[int, int]
) -> None:
    records = _records(jvm_spark, _golden_with_impossible_batches(tmp_path / "golden"), "4.3.1")
    on_jvm = replay(records, kafka, engine="jvm")
    on_python = replay(records, kafka, engine="python")
    _equal(on_jvm.history, on_python.history)
    errors = [h.replay_error for h in on_jvm.history.collect() if h.replay_error is not None]
    assert errors and all("starts" in error for error in errors)
    _equal(on_jvm.state, on_python.state)


def test_jvm_engine_without_the_jar_is_a_setup_error(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jvm, "available", lambda _spark: False)
    records = spark.createDataFrame([], "group_id string")
    with pytest.raises(SparkSetupError, match="build_jvm"):
        replay(records, engine="jvm")
