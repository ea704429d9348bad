"""Column expressions the audit tables and the finding rules share: the live share-partitions,
delivery-state names, message text, ages, and Kafka's partitioner hash."""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sharestate.kafka.constants import DELIVERY_STATE_NAMES


def live_state(state: DataFrame) -> DataFrame:
    """The rows of `share_partition_state` whose share-partition is not deleted."""
    return state.filter(~F.coalesce(F.col("deleted"), F.lit(False)))


def delivery_state_name(state: Column) -> Column:
    """`Available`, `Acquired`, ... for a delivery state number; `Unknown(n)` otherwise."""
    name: Column = F.concat(F.lit("Unknown("), state.cast("string"), F.lit(")"))
    for number, text in reversed(DELIVERY_STATE_NAMES.items()):
        name = F.when(state == F.lit(number), F.lit(text)).otherwise(name)
    return name


def _text(value: Column) -> Column:
    return F.coalesce(value.cast("string"), F.lit("?"))


def message(*parts: str | Column) -> Column:
    """A message from literal text and column values (null values print as `?`)."""
    return F.concat(*[F.lit(p) if isinstance(p, str) else _text(p) for p in parts])


def share_partition_text() -> Column:
    """`group:topic_id:partition` of the row's share-partition."""
    return message(F.col("group_id"), ":", F.col("topic_id"), ":", F.col("partition"))


def age_at_least(reference: Column, moment: Column, seconds: float) -> Column:
    """Whether `moment` lies `seconds` or more before `reference` (both timestamps)."""
    return (F.unix_micros(reference) - F.unix_micros(moment)) >= F.lit(int(seconds * 1_000_000))


def hours_between(reference: Column, moment: Column) -> Column:
    """Hours from `moment` to `reference`, to one decimal."""
    return F.round((F.unix_micros(reference) - F.unix_micros(moment)) / F.lit(3_600_000_000), 1)


def kafka_key_hash(group_id: Column, topic_id: Column, partition: Column) -> Column:
    """Kafka's `Utils.abs("group:topicId:partition".hashCode())` as a Spark column, without
    a Python UDF (`sharestate.kafka.partitioning` is the readable version; tests check they
    agree). Java's String.hashCode runs over UTF-16 code units: the text's UTF-16 bytes in
    hex, four digits per unit, are folded in long arithmetic kept below 2**32 (ANSI mode
    never sees an overflow); the finishing step makes it Java's signed int and `Utils.abs`."""
    text = F.concat_ws(":", group_id, topic_id, partition.cast("string"))
    units = F.regexp_extract_all(F.hex(F.encode(text, "UTF-16BE")), F.lit("[0-9A-F]{4}"), 0)

    def finish(unsigned: Column) -> Column:
        signed = F.when(unsigned >= 1 << 31, unsigned - (1 << 32)).otherwise(unsigned)
        return F.when(signed == -(1 << 31), F.lit(0)).otherwise(F.abs(signed)).cast("int")

    hashed = F.aggregate(
        units,
        F.lit(0).cast("long"),
        lambda acc, unit: F.pmod(
            acc * 31 + F.conv(unit, 16, 10).cast("long"), F.lit(1 << 32).cast("long")
        ),
        finish,
    )
    return F.when(group_id.isNotNull() & topic_id.isNotNull() & partition.isNotNull(), hashed)


#: Decimal digits enough for any offset difference and a sum of many: offset arithmetic
#: that must not overflow Spark's ANSI longs (impossible batches near the ends of a long).
EXACT: Final = "decimal(38,0)"
_TWO_TO_63: Final = 2**63


def as_java_long(exact: Column) -> Column:
    """An exact integer as Java's long arithmetic wraps it."""
    # As text: 2^63 and 2^64 are past a Python int that Spark takes as a long.
    shift = F.lit(str(_TWO_TO_63)).cast(EXACT)
    wrapped = F.pmod(exact + shift, F.lit(str(2 * _TWO_TO_63)).cast(EXACT)) - shift
    return wrapped.cast("long")
