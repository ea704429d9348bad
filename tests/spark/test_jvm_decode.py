"""The JVM fast tier of the share-state decoder gives exactly the Python decoder's rows.

Kafka's golden records (every release, auto-detection and each release asked for), seeded
damaged bytes, and simulator output go through `decode_share_state` with engine "jvm" and
engine "python"; every output row, decoded or quarantined with its reason, must be equal.
Skipped when the jar (scripts/build_jvm.sh) is not on the session.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sharestate import jvm
from sharestate.decode import spark as spark_decode
from sharestate.decode.columns import SHARE_STATE_RESULT_FIELDS
from sharestate.decode.tables import output_schema
from sharestate.errors import InvalidConfigError
from sharestate.kafka.records import share_state_layouts
from sharestate.kafka.wire import Writer, topic_id_to_str
from sharestate.sample import encode
from sharestate.sample.exports import KAFKA_EXPORT_SCHEMA
from sharestate.sample.simulate import SimulationSpec, simulate
from tests.support.paths import GOLDEN

pytestmark = pytest.mark.spark


RELEASES = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())
# Releases asking for the same layouts decode alike: one run covers each such set of them.
_BY_LAYOUTS: dict[tuple[str, ...], list[str]] = {}
for _release in RELEASES:
    _BY_LAYOUTS.setdefault(share_state_layouts(_release), []).append(_release)
SETTINGS = ["auto", *(",".join(releases) for releases in _BY_LAYOUTS.values())]
SORT = ("source_partition", "source_offset")


@pytest.fixture(scope="module")
def jvm_spark(spark: SparkSession) -> SparkSession:
    if not jvm.available(spark):
        pytest.skip("no sharestate JVM jar on the session (scripts/build_jvm.sh)")
    return spark


def _export(
    tmp: Path,
    records: list[tuple[bytes | None, bytes | None]],
    partitions: list[int] | None = None,
    topics: dict[int, str | None] | None = None,
) -> str:
    """A Parquet export of the records in 4 files, offsets in record order."""
    moment = datetime(2026, 11, 1, tzinfo=UTC)
    rows = [
        {
            "key": key,
            "value": value,
            "topic": "__share_group_state",
            "partition": i % 4 if partitions is None else partitions[i],
            "offset": i,
            "timestamp": moment,
            "timestampType": 0,
            "headers": [],
        }
        for i, (key, value) in enumerate(records)
    ]
    for i, topic in (topics or {}).items():
        rows[i]["topic"] = topic
    tmp.mkdir(parents=True, exist_ok=True)
    for part in range(4):
        table = pa.Table.from_pylist(rows[part::4], schema=KAFKA_EXPORT_SCHEMA)
        pq.write_table(table, tmp / f"part-{part}.parquet")
    return str(tmp)


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    """Every row, ordered by source position (and reason: wrong-topic rows come twice)."""
    rows = [row.asDict(recursive=True) for row in df.collect()]
    return sorted(rows, key=lambda r: (r["source_partition"], r["source_offset"], repr(r)))


def _jvm_tier_counts(spark: SparkSession, path: str, kafka_version: str) -> dict[int, list[int]]:
    """Per source partition: [rows the JVM tier decoded itself, all rows]."""
    layouts = share_state_layouts(kafka_version)
    schema = output_schema(SHARE_STATE_RESULT_FIELDS)
    rows = spark.read.parquet(path).select("key", "value", "partition", "offset", "timestamp")
    tiered, _, tee = spark_decode._jvm_share_state(layouts, rows, schema)
    counts: dict[int, list[int]] = {}
    for part, flagged, n in tiered.groupBy("source_partition", "needs_reference").count().collect():
        both = counts.setdefault(part, [0, 0])
        both[0] += 0 if flagged else n
        both[1] += n
    tee.unpersist()
    return counts


def _jvm_tier_count(spark: SparkSession, path: str, kafka_version: str) -> tuple[int, int]:
    """(rows the JVM tier decoded itself, all rows) of an export."""
    counts = _jvm_tier_counts(spark, path, kafka_version).values()
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def _assert_engines_agree(spark: SparkSession, path: str, kafka_version: str) -> int:
    """Both engines' all_rows, records and quarantine are equal; returns the row count."""
    df = spark.read.parquet(path)
    python = spark_decode.decode_share_state(df, kafka_version, engine="python")
    fast = spark_decode.decode_share_state(df, kafka_version, engine="jvm")
    assert fast.all_rows.schema == python.all_rows.schema
    expected = _rows(python.all_rows)
    got = _rows(fast.all_rows)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g == e, (kafka_version, e.get("key"), e.get("value"))
    quarantine = _rows(fast.quarantine)
    assert quarantine == _rows(python.quarantine)
    decoded = sum(1 for row in got if row["decode_error"] is None)
    total = df.count()
    assert decoded + len(quarantine) == total  # nothing lost
    return total


# --- Kafka's golden records ----------------------------------------------------------------


def _golden_records() -> tuple[list[tuple[bytes | None, bytes | None]], list[int]]:
    """Every release's share-state records, and the release's index in RELEASES per record."""
    records = []
    releases = []
    for index, release in enumerate(RELEASES):
        path = GOLDEN / release / "share_group_state.jsonl"
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            key, value = record["key_hex"], record["value_hex"]
            records.append(
                (
                    None if key is None else bytes.fromhex(key),
                    None if value is None else bytes.fromhex(value),
                )
            )
            releases.append(index)
    return records, releases


@pytest.fixture(scope="module")
def golden_export(tmp_path_factory: pytest.TempPathFactory) -> str:
    # Source partition = release index, to count each release's rows.
    records, releases = _golden_records()
    return _export(tmp_path_factory.mktemp("golden"), records, partitions=releases)


@pytest.mark.parametrize("setting", SETTINGS)
def test_golden_records_decode_alike(
    jvm_spark: SparkSession, golden_export: str, setting: str
) -> None:
    # Every release's records under every setting: a release's own records decode, the
    # others are quarantined (e.g. 4.0 bytes read as 4.2), alike in both engines.
    releases = setting.split(",")
    kafka_version = releases[0]
    _assert_engines_agree(jvm_spark, golden_export, kafka_version)
    counts = _jvm_tier_counts(jvm_spark, golden_export, kafka_version)
    for index, (decoded_by_jvm, total) in sorted(counts.items()):
        release = RELEASES[index]
        print(f"golden {release} as {kafka_version}: JVM tier decoded {decoded_by_jvm}/{total}")
        if kafka_version == "auto" or release in releases:
            assert decoded_by_jvm > total * 0.9, release


# --- damaged bytes -------------------------------------------------------------------------


def _random_record(rng: random.Random) -> tuple[bytes, bytes | None]:
    layout = rng.choice(["4.0", "4.1", "4.2"])
    rtype = rng.choice([0, 1])
    group = rng.choice(["g", "group-1", "", "grüppe-ß", "组", "x" * 130])
    topic = topic_id_to_str(rng.randbytes(16))
    key = encode.share_state_key(rtype, group, topic, rng.randrange(-(2**31), 2**31))
    if rtype == 0 and rng.random() < 0.1:
        return key, None
    n = rng.choice([0, 1, 2, 3, 6, 40, 126, 127, 130])
    batches = [
        (
            rng.randrange(-(2**63), 2**63),
            rng.randrange(-(2**63), 2**63),
            rng.randrange(-128, 128),
            rng.randrange(-(2**15), 2**15),
        )
        for _ in range(n)
    ]
    dcc = rng.choice([None, 0, 5, 2**31 - 1, -(2**31)]) if layout == "4.2" else None
    epoch = rng.randrange(65536) if layout == "4.0" else rng.randrange(-(2**31), 2**31)
    if rtype == 0:
        value = encode.share_snapshot_value(
            snapshot_epoch=epoch,
            state_epoch=rng.randrange(-(2**31), 2**31),
            leader_epoch=rng.randrange(-(2**31), 2**31),
            start_offset=rng.randrange(-(2**63), 2**63),
            batches=batches,
            create_timestamp=rng.randrange(-(2**63), 2**63),
            write_timestamp=rng.randrange(-(2**63), 2**63),
            delivery_complete_count=dcc,
            layout=layout,
        )
    else:
        value = encode.share_update_value(
            snapshot_epoch=epoch,
            leader_epoch=rng.randrange(-(2**31), 2**31),
            start_offset=rng.randrange(-(2**63), 2**63),
            batches=batches,
            delivery_complete_count=dcc,
            layout=layout,
        )
    return key, value


def _with_tags(value: bytes, rng: random.Random) -> bytes:
    """Replace the closing tagged section by others: unknown tags, a repeated or odd-sized
    DeliveryCompleteCount, a big tag number."""
    head = value[: value.rfind(b"\x00")] if value.endswith(b"\x00") else value
    choices = [
        [(0, b"\x00\x00\x00\x07"), (0, b"\x00\x00\x00\x08")],
        [(0, b"\x00\x00\x07")],
        [(3, b"abc")],
        [(0, b"\x00\x00\x00\x01"), (9, b"")],
        [(2**20, b"")],
    ]
    w = Writer()
    fields = rng.choice(choices)
    w.uvarint(len(fields))
    for tag, data in fields:
        w.uvarint(tag).uvarint(len(data)).raw(data)
    return head + w.getvalue()


def _mutate(data: bytes, rng: random.Random) -> bytes:
    how = rng.choice(["truncate", "flip", "extend", "splice", "keep", "tags"])
    if how == "truncate" and data:
        return data[: rng.randrange(len(data))]
    if how == "flip" and data:
        at = rng.randrange(len(data))
        return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]
    if how == "extend":
        return data + rng.randbytes(rng.randint(1, 8))
    if how == "splice" and data:
        at = rng.randrange(len(data) + 1)
        return data[:at] + rng.randbytes(rng.randint(0, 6)) + data[at:]
    if how == "tags" and len(data) > 2:
        return _with_tags(data, rng)
    return data


def _damaged_records(count: int, seed: int) -> list[tuple[bytes | None, bytes | None]]:
    rng = random.Random(seed)
    records: list[tuple[bytes | None, bytes | None]] = []
    for _ in range(count):
        roll = rng.random()
        if roll < 0.03:
            records.append((None, rng.choice([None, rng.randbytes(10)])))
            continue
        if roll < 0.08:
            records.append((rng.randbytes(rng.randint(0, 40)), rng.randbytes(rng.randint(0, 80))))
            continue
        key, value = _random_record(rng)
        if rng.random() < 0.03:  # malformed UTF-8 in the group id, lengths kept
            key = key[:4] + b"\xff\xc0" + key[6:] if len(key) > 26 else key
        if rng.random() < 0.4:
            key = _mutate(key, rng)
        if value is not None and rng.random() < 0.6:
            value = _mutate(value, rng)
        if rng.random() < 0.02:
            value = None  # includes update tombstones
        records.append((key, value))
    return records


@pytest.fixture(scope="module")
def damaged_export(tmp_path_factory: pytest.TempPathFactory) -> str:
    records = _damaged_records(3000, seed=932)
    topics = {i: ("__consumer_offsets" if i % 2 else None) for i in range(5, 3000, 397)}
    return _export(tmp_path_factory.mktemp("damaged"), records, topics=topics)


@pytest.mark.parametrize("kafka_version", ["auto", "4.0", "4.1", "4.2"])
def test_damaged_records_decode_alike(
    jvm_spark: SparkSession, damaged_export: str, kafka_version: str
) -> None:
    total = _assert_engines_agree(jvm_spark, damaged_export, kafka_version)
    assert total == 3000
    decoded_by_jvm, _ = _jvm_tier_count(jvm_spark, damaged_export, kafka_version)
    print(f"damaged, {kafka_version}: JVM tier decoded {decoded_by_jvm} of {total} rows")
    assert decoded_by_jvm > 0


def test_flagged_rows_are_left_behind_by_the_decode_pass(
    jvm_spark: SparkSession, damaged_export: str
) -> None:
    """The rows the JVM tier leaves to Python come from its own pass (`sharestate.jvm.Tee`),
    or, where that pass has not run, from parsing the input again: the same rows."""
    layouts = share_state_layouts("auto")
    schema = output_schema(SHARE_STATE_RESULT_FIELDS)
    rows = jvm_spark.read.parquet(damaged_export).select(*spark_decode._INPUT_COLUMNS)
    _, flagged_alone, tee_alone = spark_decode._jvm_share_state(layouts, rows, schema)
    assert tee_alone.cached_partitions() == 0
    alone = sorted(flagged_alone.collect(), key=repr)
    tiered, flagged, tee = spark_decode._jvm_share_state(layouts, rows, schema)
    tiered.write.format("noop").mode("overwrite").save()
    assert tee.cached_partitions() == tiered.rdd.getNumPartitions() > 1
    flagged_by_tier = tiered.filter("needs_reference").select(
        "key",
        "value",
        F.col("source_partition").alias("partition"),
        F.col("source_offset").alias("offset"),
        F.col("source_timestamp").alias("timestamp"),
    )
    assert sorted(flagged.collect(), key=repr) == alone
    assert alone == sorted(flagged_by_tier.collect(), key=repr)
    assert 0 < len(alone) < 3000
    for each in (tee_alone, tee):
        each.unpersist()


# --- simulator output ----------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["4.1", "4.2"])
def test_simulated_export_decodes_alike(
    jvm_spark: SparkSession, tmp_path: Path, layout: str
) -> None:
    table = simulate(SimulationSpec(records=4000, share_partitions=60, layout=layout, workers=1))
    pq.write_table(table, tmp_path / "part-0.parquet")
    df = jvm_spark.read.parquet(str(tmp_path))
    python = spark_decode.decode_share_state(df, engine="python")
    fast = spark_decode.decode_share_state(df, engine="jvm")
    assert _rows(fast.records) == _rows(python.records)
    assert _rows(fast.quarantine) == _rows(python.quarantine)
    decoded_by_jvm, total = _jvm_tier_count(jvm_spark, str(tmp_path), "auto")
    print(f"simulated {layout}: JVM tier decoded {decoded_by_jvm} of {total} rows")
    assert decoded_by_jvm == total == table.num_rows


# --- engine choice -------------------------------------------------------------------------


def test_engine_is_checked(spark: SparkSession) -> None:
    df = spark.createDataFrame([], _ddl())
    with pytest.raises(InvalidConfigError, match="engine"):
        spark_decode.decode_share_state(df, engine="rust")
    # "auto" picks whatever the session has; both tiers give the same schema.
    auto = spark_decode.decode_share_state(df).all_rows.schema
    assert auto == spark_decode.decode_share_state(df, engine="python").all_rows.schema


def test_jvm_tier_needs_the_expected_input_types(jvm_spark: SparkSession) -> None:
    df = jvm_spark.createDataFrame([], _ddl()).withColumn("offset", F.col("offset").cast("int"))
    # "auto" falls back to Python; "jvm" says why it cannot run.
    assert spark_decode._use_jvm(df, "auto") is False
    with pytest.raises(Exception, match="offset is int"):
        spark_decode.decode_share_state(df, engine="jvm")


def _ddl() -> str:
    return (
        "key binary, value binary, topic string, partition int, offset bigint,"
        " timestamp timestamp, timestampType int,"
        " headers array<struct<key:string,value:binary>>"
    )
