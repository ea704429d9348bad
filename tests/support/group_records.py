"""Decoded `__consumer_offsets` group records built by hand, as the decode step gives them,
for the tests of the share groups and of the rules that read them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from sharestate.decode.columns import GROUP_RECORD_FIELDS
from sharestate.decode.spark import spark_type

#: One record: source_partition, source_offset, source_timestamp, record_type_id, group_id,
#: member_id, tombstone, and its other fields by name.
GroupRecord = tuple[int, int, datetime, int, str | None, str | None, bool | None, Mapping[str, Any]]


def group_records_frame(spark: SparkSession, records: Iterable[GroupRecord]) -> DataFrame:
    """`records` as a DataFrame of decoded group records (a share record: type 9 or above)."""
    value_type = spark_type(GROUP_RECORD_FIELDS)
    assert isinstance(value_type, T.StructType)
    schema = T.StructType(
        [
            T.StructField("source_partition", T.IntegerType()),
            T.StructField("source_offset", T.LongType()),
            T.StructField("source_timestamp", T.TimestampType()),
            *value_type.fields,
        ]
    )
    rows = []
    for partition, offset, at, kind, group, member, tombstone, values in records:
        row = dict.fromkeys(schema.fieldNames())
        row.update(
            source_partition=partition,
            source_offset=offset,
            source_timestamp=at,
            record_type_id=kind,
            is_share_record=kind >= 9,
            tombstone=tombstone,
            group_id=group,
            member_id=member,
        )
        row.update(values)
        rows.append(tuple(row[name] for name in schema.fieldNames()))
    return spark.createDataFrame(rows, schema)
