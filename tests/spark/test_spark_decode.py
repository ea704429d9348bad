"""The decode step on Spark: inputs, reconciliation, quarantine, formats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sharestate.errors import InputError, InputSchemaError
from sharestate.io import ROW_IDENTITY, count_rows, deduplicate
from sharestate.job import JobConfig, cli, compute, summarize
from sharestate.sample import encode
from sharestate.sample.exports import KAFKA_EXPORT_SCHEMA, SampleSpec, write_sample
from tests.support.paths import GOLDEN

pytestmark = pytest.mark.spark
TOPIC = "Uj5wn_FqTXirEASvVZRY1w"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sample")
    write_sample(root, SampleSpec(records=800))
    return root


def _export(path: Path, rows: list[dict[str, Any]]) -> str:
    path.mkdir(parents=True, exist_ok=True)
    full = [
        {
            "topic": "__share_group_state",
            "partition": 0,
            "timestampType": 0,
            "headers": [],
            "timestamp": pa.scalar(0, pa.timestamp("us", tz="UTC")).as_py(),
            **row,
        }
        for row in rows
    ]
    pq.write_table(pa.Table.from_pylist(full, schema=KAFKA_EXPORT_SCHEMA), path / "part-0.parquet")
    return str(path)


def test_every_row_is_decoded_or_quarantined(spark: SparkSession, sample: Path) -> None:
    config = JobConfig(
        share_state=str(sample / "share_state"), consumer_offsets=str(sample / "consumer_offsets")
    )
    results = compute(spark, config)
    summary = summarize(results)
    results.unpersist()
    for source in ("share_state", "consumer_offsets"):
        info = summary["inputs"][source]
        assert info["reconciled"], info
        assert (
            info["rows_read"] == info["duplicates_dropped"] + info["decoded"] + info["quarantined"]
        )
    state = summary["inputs"]["share_state"]
    # The sample carries one duplicated row and two damaged ones.
    assert (state["duplicates_dropped"], state["quarantined"]) == (1, 2)
    assert summary["quarantine"]["by_reason_kind"] == {
        "no layout fits": 1,
        "unknown value version": 1,
    }
    assert set(summary["share_state_records"]["by_record_type"]) == {
        "snapshot",
        "update",
        "tombstone",
    }


def test_records_match_the_reference_decoder(spark: SparkSession, sample: Path) -> None:
    from sharestate.kafka.records import decode_share_state

    rows = pq.read_table(sample / "share_state").to_pylist()
    expected = {}
    for row in rows:
        try:
            decoded = decode_share_state(row["key"], row["value"])
        except Exception:
            continue
        expected[(row["partition"], row["offset"])] = (
            decoded["start_offset"],
            decoded["state_batches"],
        )
    results = compute(spark, JobConfig(share_state=str(sample / "share_state")))
    got = {
        (r.source_partition, r.source_offset): (r.start_offset, [tuple(b) for b in r.state_batches])
        for r in results.share_state_records.collect()
    }
    results.unpersist()
    assert got == expected


def test_rows_of_another_topic_are_quarantined(spark: SparkSession, tmp_path: Path) -> None:
    key = encode.share_state_key(1, "g", TOPIC, 0)
    value = encode.share_update_value(snapshot_epoch=0, leader_epoch=0, start_offset=5)
    path = _export(
        tmp_path / "mixed",
        [
            {"key": key, "value": value, "offset": 0},
            {"key": key, "value": value, "offset": 1, "topic": "orders"},
        ],
    )
    results = compute(spark, JobConfig(share_state=path))
    quarantine = results.quarantine.collect()
    assert results.share_state_records.count() == 1
    assert [(q.source_offset, q.reason_kind) for q in quarantine] == [(1, "wrong topic")]
    assert "orders" in quarantine[0].reason
    results.unpersist()


def test_empty_export_gives_empty_tables(spark: SparkSession, tmp_path: Path) -> None:
    results = compute(spark, JobConfig(share_state=_export(tmp_path / "empty", [])))
    assert results.share_state_records.count() == 0
    assert summarize(results)["inputs"]["share_state"]["reconciled"]
    results.unpersist()


def test_missing_and_mistyped_columns_are_named(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "wrong"
    path.mkdir()
    pq.write_table(
        pa.table({"key": pa.array([b"x"]), "partition": pa.array(["0"])}), path / "p.parquet"
    )
    with pytest.raises(InputSchemaError) as err:
        compute(spark, JobConfig(share_state=str(path)))
    message = str(err.value)
    for expected in ("missing column(s) value, topic, offset, timestamp", "partition is string"):
        assert expected in message


def test_missing_path_is_a_one_line_input_error(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file or directory"):
        compute(spark, JobConfig(share_state=str(tmp_path / "nope")))


def test_delta_input_is_detected(spark: SparkSession, sample: Path, tmp_path: Path) -> None:
    delta_path = str(tmp_path / "delta_export")
    spark.read.parquet(str(sample / "share_state")).write.format("delta").save(delta_path)
    results = compute(spark, JobConfig(share_state=delta_path))
    assert results.inputs["share_state"].format == "delta"
    parquet = compute(spark, JobConfig(share_state=str(sample / "share_state")))
    assert results.share_state_records.count() == parquet.share_state_records.count()
    results.unpersist()
    parquet.unpersist()


def test_count_rows_counts_duplicates_as_drop_duplicates_drops_them(spark: SparkSession) -> None:
    # Offsets across bitmap ranges (32,768 each), zero, negatives, Long extremes, nulls, and
    # the same offset in another partition or topic (not a duplicate).
    offsets = [0, 1, 2, 32_767, 32_768, 32_769, 65_536, -1, -32_768, -32_769, 2**63 - 1]
    offsets += [-(2**63), None]
    rows = [("t", 0, o) for o in offsets] + [("t", 1, o) for o in offsets[:4]]
    rows += [("u", 0, 1), (None, 0, 1), (None, None, None)]
    repeated = [rows[1], rows[4], rows[4], rows[7], rows[10], rows[11], rows[12], rows[12]]
    repeated += [rows[-1], rows[-2]]
    df = spark.createDataFrame(rows + repeated, "topic string, partition int, offset long")
    unique = df.dropDuplicates(list(ROW_IDENTITY))
    counts = count_rows(df)
    assert counts.read == len(rows) + len(repeated)
    assert counts.duplicates == counts.read - unique.count()
    assert counts.duplicates == len(repeated)
    clean = count_rows(unique)
    assert (clean.read, clean.duplicates) == (len(rows), 0)
    # Known to be clean: the rows themselves, no shuffle; else duplicates are dropped.
    assert deduplicate(unique, clean) is unique
    assert deduplicate(df, counts).count() == len(rows)
    assert deduplicate(df).count() == len(rows)
    empty = count_rows(df.limit(0))
    assert (empty.read, empty.duplicates) == (0, 0)


def test_duplicates_and_shuffled_rows_change_nothing(
    spark: SparkSession, sample: Path, tmp_path: Path
) -> None:
    clean = spark.read.parquet(str(sample / "share_state"))
    messy_path = str(tmp_path / "messy")
    clean.union(clean.sample(fraction=0.5, seed=3)).orderBy(F.rand(5)).repartition(3).write.parquet(
        messy_path
    )
    columns = ["source_partition", "source_offset", "record_type", "start_offset", "state_batches"]
    a = compute(spark, JobConfig(share_state=str(sample / "share_state")))
    b = compute(spark, JobConfig(share_state=messy_path))
    assert sorted(a.share_state_records.select(columns).collect()) == sorted(
        b.share_state_records.select(columns).collect()
    )
    # ... nor the replayed state.
    assert sorted(a.share_partition_state.collect()) == sorted(b.share_partition_state.collect())
    a.unpersist()
    b.unpersist()


@pytest.mark.parametrize("release", ["4.0.2", "4.4.0"])
def test_kafkas_golden_records_through_spark(
    spark: SparkSession, tmp_path: Path, release: str
) -> None:
    import json

    golden = GOLDEN / release
    rows = []
    for topic, name in (
        ("__share_group_state", "share_group_state"),
        ("__consumer_offsets", "consumer_offsets"),
    ):
        for offset, line in enumerate((golden / f"{name}.jsonl").read_text().splitlines()):
            record = json.loads(line)
            value = record["value_hex"]
            rows.append(
                {
                    "key": bytes.fromhex(record["key_hex"]),
                    "value": None if value is None else bytes.fromhex(value),
                    "offset": offset,
                    "topic": topic,
                    "expected": record,
                }
            )
    state = _export(
        tmp_path / "state",
        [
            {k: v for k, v in r.items() if k != "expected"}
            for r in rows
            if r["topic"] == "__share_group_state"
        ],
    )
    offsets = _export(
        tmp_path / "offsets",
        [
            {k: v for k, v in r.items() if k != "expected"}
            for r in rows
            if r["topic"] == "__consumer_offsets"
        ],
    )
    results = compute(spark, JobConfig(share_state=state, consumer_offsets=offsets))
    assert results.quarantine.count() == 0
    by_offset = {r.source_offset: r for r in results.share_state_records.collect()}
    kafka = [r["expected"] for r in rows if r["topic"] == "__share_group_state"]
    assert len(by_offset) == len(kafka)
    for offset, record in enumerate(kafka):
        value = (record["value"] or {}).get("data", {})
        got = by_offset[offset]
        assert got.group_id == record["key"]["data"]["groupId"]
        assert got.start_offset == value.get("startOffset")
        assert got.delivery_complete_count == value.get("deliveryCompleteCount")
        assert len(got.state_batches) == len(value.get("stateBatches", []))
    groups = results.share_group_records
    assert groups is not None
    passthrough = groups.filter(~F.col("is_share_record"))
    assert passthrough.filter(F.col("key").isNull()).count() == 0
    assert groups.filter(F.col("is_share_record") & F.col("key").isNotNull()).count() == 0
    results.unpersist()


# --- unreadable files and wrong paths ----------------------------------------------------------


def _two_file_export(sample: Path, target: Path) -> list[Path]:
    """The sample's share-state export as two Parquet files: Spark infers the schema from
    the first, so damage to the second is met only when the rows are read."""
    table = pq.read_table(sample / "share_state")
    target.mkdir()
    half = table.num_rows // 2
    files = [target / "part-0.parquet", target / "part-1.parquet"]
    pq.write_table(table.slice(0, half), files[0])
    pq.write_table(table.slice(half), files[1])
    return files


def _damage(file: Path, how: str) -> None:
    data = file.read_bytes()
    if how == "truncated":
        file.write_bytes(data[: len(data) // 2])
    else:  # the first page's header and data overwritten; the footer intact
        scrambled = bytes(b ^ 0x5A for b in data[4 : len(data) // 2])
        file.write_bytes(data[:4] + scrambled + data[len(data) // 2 :])


@pytest.mark.parametrize("how", ["truncated", "scrambled"])
def test_an_unreadable_file_is_named_with_its_option(
    spark: SparkSession,
    sample: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    how: str,
) -> None:
    export = tmp_path / "export"
    _damage(_two_file_export(sample, export)[1], how)
    output = tmp_path / "out"
    args = ["replay", "--share-state", str(export), "--output", str(output)]
    assert cli.main([*args, "--output-format", "parquet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith(f"sharestate: error: --share-state {export}: cannot read the file ")
    assert "part-1.parquet" in err and "re-export or remove that file" in err
    with pytest.raises(InputError, match="part-1.parquet"):  # the notebook API too
        compute(spark, JobConfig(share_state=str(export))).share_state_records.count()


def test_a_file_that_is_not_parquet_is_named(
    spark: SparkSession, sample: Path, tmp_path: Path
) -> None:
    export = tmp_path / "export"
    _two_file_export(sample, export)
    (export / "export-meta.json").write_text('{"topic": "__share_group_state"}\n')
    with pytest.raises(InputError) as err:
        compute(spark, JobConfig(share_state=str(export)))
    message = str(err.value)
    assert message.startswith(f"--share-state {export}: cannot read the file ")
    assert "export-meta.json: it is not a Parquet file" in message


def test_a_path_inside_a_delta_table_names_the_table(
    spark: SparkSession, sample: Path, tmp_path: Path
) -> None:
    table = tmp_path / "delta_export"
    spark.read.parquet(str(sample / "share_state")).write.format("delta").save(str(table))
    with pytest.raises(InputError) as err:
        compute(spark, JobConfig(share_state=str(table / "_delta_log")))
    assert str(err.value).startswith(
        f"--share-state {table / '_delta_log'} is inside the Delta table {table}:"
    )


def test_a_folder_of_tables_names_them(spark: SparkSession, sample: Path) -> None:
    with pytest.raises(InputError) as err:
        compute(spark, JobConfig(share_state=str(sample)))
    message = str(err.value)
    assert "UNABLE_TO_INFER_SCHEMA" in message
    assert message.endswith(
        f"Sub-folders hold tables: {sample / 'consumer_offsets'} (Parquet), "
        f"{sample / 'share_state'} (Parquet); give the path of one of those"
    )
