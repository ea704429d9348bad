"""The run summary's counts: of tables on the driver (Arrow), or of per-record tables in Spark
(each count over the parts of its rows, in Spark's tasks, added up here): the same
functions either way (`sharestate.places.by_key`)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sharestate.audits import REASON_DELIVERY_LIMIT, SEVERITIES
from sharestate.decode.columns import KEY
from sharestate.kafka.constants import as_java_long
from sharestate.places import Frame, Step, by_key

#: One pair count: (first value, second value, rows).
Pair = tuple[str, str, int]


def _parts(frame: Frame, columns: Sequence[str], steps: dict[str, Step]) -> dict[str, pa.Table]:
    """Each step over `frame`'s `columns`, per part of its rows (in Spark, per partition: no
    shuffle); each step's parts are added up by its caller."""
    if isinstance(frame, pa.Table):
        return by_key(frame.select(list(columns)), None, steps, "driver")
    return by_key(frame.select(*columns), None, steps, "spark")


def _pairs(first: str, second: str, rows: pa.Table) -> pa.Table:
    return rows.group_by([first, second]).aggregate([([], "count_all")])


def _distinct(columns: Sequence[str], rows: pa.Table) -> pa.Table:
    return rows.select(list(columns)).group_by(list(columns)).aggregate([])


def pair_counts(frame: Frame, first: str, second: str) -> list[Pair]:
    """Rows per (first, second) value pair."""
    parts = _parts(frame, [first, second], {"pairs": functools.partial(_pairs, first, second)})
    counted = parts["pairs"].group_by([first, second]).aggregate([("count_all", "sum")])
    return [(row[first], row[second], int(row["count_all_sum"])) for row in counted.to_pylist()]


def record_keys(records: Frame) -> dict[str, int]:
    """The share-partitions and groups the records name (a null group id is no group, as
    Spark's `countDistinct` has it)."""
    parts = _parts(records, KEY, {"keys": functools.partial(_distinct, KEY)})
    keys = _distinct(KEY, parts["keys"])
    return {
        "share_partitions": keys.num_rows,
        "groups": pc.count_distinct(keys.column("group_id"), mode="only_valid").as_py(),
    }


def counts_by(table: pa.Table, column: str) -> dict[str, int]:
    """Rows per value of `column`, by value (as text; a null is `None`)."""
    counted = table.group_by([column]).aggregate([([], "count_all")]).to_pylist()
    return {str(r[column]): int(r["count_all"]) for r in sorted(counted, key=_value_order(column))}


def _value_order(column: str) -> Any:
    # Spark's orderBy: nulls first, then by value.
    return lambda row: (row[column] is not None, row[column])


def state_keys(state: pa.Table) -> dict[str, int]:
    """The state's share-partitions, groups (distinct non-null group ids) and deleted
    share-partitions."""
    return {
        "keys": state.num_rows,
        "groups": pc.count_distinct(state.column("group_id"), mode="only_valid").as_py(),
        "deleted": _true_count(state.column("deleted")),
    }


def _state_rows(rows: pa.Table) -> pa.Table:
    return pa.table({"rows": [rows.num_rows], "deleted": [_true_count(rows.column("deleted"))]})


def state_counts(state: Frame) -> dict[str, int]:
    parts = _parts(state, ["deleted"], {"state": _state_rows})["state"]
    return {
        "share_partitions": _sum(parts.column("rows")),
        "deleted": _sum(parts.column("deleted")),
    }


def _share_group_ids(rows: pa.Table) -> pa.Table:
    shared = rows.filter(pc.fill_null(rows.column("is_share_record"), False))
    return _distinct(["group_id"], shared)


def group_record_counts(records: Frame) -> dict[str, Any]:
    parts = _parts(
        records,
        ["record_type", "is_share_record", "group_id"],
        {
            "types": functools.partial(_pairs, "record_type", "is_share_record"),
            "groups": _share_group_ids,
        },
    )
    by_type = parts["types"].group_by(["record_type"]).aggregate([("count_all", "sum")])
    by_record_type = {str(r["record_type"]): int(r["count_all_sum"]) for r in by_type.to_pylist()}
    return {
        "rows": sum(by_record_type.values()),
        "by_record_type": dict(sorted(by_record_type.items())),
        "share_groups": _distinct(["group_id"], parts["groups"]).num_rows,
    }


def ranges_by_reason(poison: pa.Table, archived: pa.Table) -> dict[str, tuple[int, int]]:
    """Per reason: the ranges and offsets of the two range tables (the poison messages'
    reason is the delivery limit)."""
    by_reason = {REASON_DELIVERY_LIMIT: (poison.num_rows, _exact_sum(poison.column("offsets")))}
    for reason in pc.unique(archived.column("reason")).to_pylist():
        rows = archived.filter(pc.equal(archived.column("reason"), reason))
        by_reason[reason] = (rows.num_rows, _exact_sum(rows.column("offsets")))
    return by_reason


def finding_counts(findings: pa.Table) -> dict[str, Any]:
    by_code: dict[str, dict[str, int]] = {}
    by_severity = dict.fromkeys(SEVERITIES, 0)
    counted = findings.group_by(["severity", "code"]).aggregate([([], "count_all")])
    for row in counted.to_pylist():
        by_severity[row["severity"]] = by_severity.get(row["severity"], 0) + row["count_all"]
        by_code.setdefault(row["severity"], {})[row["code"]] = row["count_all"]
    return {
        "by_severity": by_severity,
        "by_code": {severity: dict(sorted(codes.items())) for severity, codes in by_code.items()},
    }


def pruning_counts(pruning_cutoff: pa.Table) -> dict[str, int]:
    return {
        "partitions": pruning_cutoff.num_rows,
        "prunable": _true_count(pruning_cutoff.column("prunable")),
        "records_before_cutoff": _sum(pruning_cutoff.column("records_before_cutoff")),
    }


def share_group_counts(share_groups: pa.Table) -> dict[str, int]:
    return {
        "groups": share_groups.num_rows,
        "deleted": _true_count(share_groups.column("deleted")),
        "members": _sum(share_groups.column("member_count")),
    }


def lag_counts(lag: pa.Table) -> dict[str, int]:
    values = lag.column("lag")
    return {
        "share_partitions": lag.num_rows,
        "with_lag": len(values) - values.null_count,
        "total_lag": _sum(values),
    }


def _true_count(flags: pa.ChunkedArray) -> int:
    return int(pc.sum(pc.fill_null(flags, False).cast(pa.int64())).as_py() or 0)


def _sum(values: pa.ChunkedArray) -> int:
    return int(pc.sum(values).as_py() or 0)


def _exact_sum(values: pa.ChunkedArray) -> int:
    """The exact sum as Java's long arithmetic wraps it."""
    return as_java_long(sum(v for v in values.to_pylist() if v is not None))
