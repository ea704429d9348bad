"""The job's computation with nothing written: what a notebook calls.

`compute(spark, config)` reads the exports, decodes and replays them and returns the
DataFrames;
`summarize(results)` counts what happened, including the row reconciliation
(rows read = duplicates dropped + decoded + quarantined, for every input).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sharestate import spark_decode
from sharestate.combiner import LATEST
from sharestate.config import JobConfig
from sharestate.io import Export, deduplicate, read_export
from sharestate.records import parse_kafka_version
from sharestate.replay import as_of, replay
from sharestate.schemas import CONSUMER_OFFSETS_TOPIC, SHARE_STATE_TOPIC


@dataclass
class Results:
    """The run's tables as DataFrames, plus the inputs they came from (for counting)."""

    share_state_records: DataFrame
    share_partition_state: DataFrame
    share_partition_history: DataFrame
    share_group_records: DataFrame | None
    quarantine: DataFrame
    inputs: dict[str, Export] = field(default_factory=dict)
    _cached: list[DataFrame] = field(default_factory=list, repr=False)

    def tables(self) -> dict[str, DataFrame]:
        """Output table name -> DataFrame, in the order they are written."""
        out = {
            "share_state_records": self.share_state_records,
            "share_partition_state": self.share_partition_state,
            "share_partition_history": self.share_partition_history,
        }
        if self.share_group_records is not None:
            out["share_group_records"] = self.share_group_records
        out["quarantine"] = self.quarantine
        return out

    def unpersist(self) -> None:
        for df in self._cached:
            df.unpersist()


def _decoded_and_cached(decoded: spark_decode.Decoded, cache: list[DataFrame]) -> None:
    # Records and quarantine are two filters of one decode; cache the decode so writing both
    # does not decode twice (Spark's cache matches the shared sub-plan).
    cache.append(decoded.all_rows.persist(StorageLevel.MEMORY_AND_DISK))


def compute(spark: SparkSession, config: JobConfig) -> Results:
    """Read, decode and replay the exports named in `config`; nothing is written."""
    share_state = read_export(
        spark,
        config.share_state,
        what="--share-state",
        topic=SHARE_STATE_TOPIC,
        input_format=config.input_format,
    )
    inputs = {"share_state": share_state}
    cached: list[DataFrame] = []
    state = spark_decode.decode_share_state(deduplicate(share_state.rows), config.kafka_version)
    _decoded_and_cached(state, cached)
    quarantine = state.quarantine
    group_records = None
    if config.consumer_offsets:
        offsets = read_export(
            spark,
            config.consumer_offsets,
            what="--consumer-offsets",
            topic=CONSUMER_OFFSETS_TOPIC,
            input_format=config.input_format,
        )
        inputs["consumer_offsets"] = offsets
        groups = spark_decode.decode_consumer_offsets(
            deduplicate(offsets.rows), config.kafka_version
        )
        _decoded_and_cached(groups, cached)
        group_records = groups.records
        quarantine = quarantine.unionByName(groups.quarantine)
    replayed = replay(
        as_of(state.records, source_offset=config.as_of_offset, timestamp=config.as_of_timestamp),
        parse_kafka_version(config.kafka_version) or LATEST,
    )
    cached.append(replayed.folded.persist(StorageLevel.MEMORY_AND_DISK))
    return Results(
        state.records, replayed.state, replayed.history, group_records, quarantine, inputs, cached
    )


def _count_by(df: DataFrame, column: str) -> dict[str, int]:
    return {
        str(row[column]): int(row["count"])
        for row in df.groupBy(column).count().orderBy(column).collect()
    }


def summarize(results: Results) -> dict[str, Any]:
    """Counts for the run summary; every number comes from the data."""
    quarantine_by_source = _count_by(results.quarantine, "source")
    summary: dict[str, Any] = {"inputs": {}}
    decoded_tables = {
        "share_state": results.share_state_records,
        "consumer_offsets": results.share_group_records,
    }
    for source, export in results.inputs.items():
        read = export.rows.count()
        unique = deduplicate(export.rows).count()
        decoded_df = decoded_tables[source]
        decoded = decoded_df.count() if decoded_df is not None else 0
        quarantined = quarantine_by_source.get(source, 0)
        summary["inputs"][source] = {
            "path": export.path,
            "format": export.format,
            "rows_read": read,
            "duplicates_dropped": read - unique,
            "decoded": decoded,
            "quarantined": quarantined,
            "reconciled": read == (read - unique) + decoded + quarantined,
        }
    if "consumer_offsets" not in results.inputs:
        summary["inputs"]["consumer_offsets"] = {
            "skipped": "no --consumer-offsets given: group-metadata checks are skipped"
        }
    records = results.share_state_records
    summary["share_state_records"] = {
        "by_record_type": _count_by(records, "record_type"),
        "by_layout": _count_by(records.filter(F.col("layout").isNotNull()), "layout"),
        "share_partitions": records.select("group_id", "topic_id", "partition").distinct().count(),
        "groups": records.select("group_id").distinct().count(),
    }
    state = results.share_partition_state
    summary["share_partition_state"] = {
        "share_partitions": state.count(),
        "deleted": state.filter(F.col("deleted")).count(),
    }
    if results.share_group_records is not None:
        groups = results.share_group_records
        summary["share_group_records"] = {
            "by_record_type": _count_by(groups, "record_type"),
            "share_groups": groups.filter(F.col("is_share_record"))
            .select("group_id")
            .distinct()
            .count(),
        }
    summary["quarantine"] = {
        "rows": sum(quarantine_by_source.values()),
        "by_reason_kind": _count_by(results.quarantine, "reason_kind"),
    }
    return summary
