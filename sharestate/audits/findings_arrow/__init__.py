"""The `findings` table in Arrow, on the driver: every rule of `findings.RULES` has an Arrow
twin (one module per module of rules, registered with `rows.twin_of`) that finds the same
rows from the same inputs as Arrow tables. A small run finds its findings here: a Spark
rule is a few small Spark jobs, whose fixed cost is most of a small export's run, while
the inputs here are a row per share-partition or fewer, or a few columns of the records.

`findings_table(inputs)` is the twin of `findings.findings_table`; the tests hold each
twin's rows equal to its rule's. Pure pyarrow: no Spark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sharestate.arrow_keys import rows_by_key
from sharestate.audits.findings import PER_SHARE_PARTITION_RULES, RULES, FindingRule
from sharestate.audits.findings_arrow import (  # noqa: F401  (each registers its twins)
    groups,
    lag,
    placement,
    records,
    snapshots,
    state,
)
from sharestate.audits.findings_arrow.rows import (
    FINDINGS_ARROW_SCHEMA,
    TWINS,
    concat,
    run_twin,
)
from sharestate.decode.columns import KEY

__all__ = [
    "FINDINGS_ARROW_SCHEMA",
    "concat",
    "findings_of",
    "findings_table",
    "missing_twins",
    "per_share_partition_findings",
    "rows_of",
]


def missing_twins() -> list[str]:
    """The rules of `RULES` without an Arrow twin."""
    return [rule.name for rule in RULES if rule.name not in TWINS]


def findings_table(inputs: Mapping[str, Any]) -> pa.Table:
    """Every finding (`FINDINGS_ARROW_SCHEMA`), in `RULES` order: the rows of each rule
    whose inputs are there. `inputs`: a value (or None) for each `FindingInputs` field,
    the tables as Arrow."""
    if missing := missing_twins():
        raise NotImplementedError(f"finding rules without an Arrow twin: {', '.join(missing)}")
    parts = [rows for rule in RULES if (rows := run_twin(rule, inputs)) is not None]
    return concat(parts)


def findings_of(rules: Sequence[FindingRule[Any]], inputs: Mapping[str, Any]) -> pa.Table | None:
    """The rows of those of `rules` whose inputs are there (None when none is): the twin
    of `findings.findings_of`."""
    parts = [rows for rule in rules if (rows := run_twin(rule, inputs)) is not None]
    return concat(parts) if parts else None


def rows_of(findings: pa.Table, rules: Sequence[FindingRule[Any]]) -> pa.Array:
    """Per row of `findings`, whether it is one of `rules`' (`FindingRule.matches`)."""
    return pa.array(_matches(findings, rules))


def _matches(findings: pa.Table, rules: Sequence[FindingRule[Any]]) -> np.ndarray:
    codes, sources = findings.column("code"), findings.column("source")
    out = np.zeros(findings.num_rows, dtype=bool)
    for rule in rules:
        same = pc.equal(codes, rule.code.value)
        if rule.source is not None:
            same = pc.and_(same, pc.equal(sources, rule.source.value))
        out |= pc.fill_null(same, False).to_numpy(zero_copy_only=False)
    return out


def per_share_partition_findings(
    stored: pa.Table,
    touched_keys: pa.Table,
    *,
    segment_starts: pa.Table,
    delivery_counts: pa.Table,
    delivery_count_limit: int,
) -> pa.Table:
    """The twin of `findings.per_share_partition_findings`: `stored` (an earlier run's
    `findings`) keeps the per-share-partition rules' rows of the share-partitions not in
    `touched_keys`, and the twins find those of the touched ones (`segment_starts` and
    `delivery_counts` holding their rows)."""
    stored = stored.select(FINDINGS_ARROW_SCHEMA.names).cast(FINDINGS_ARROW_SCHEMA)
    ours = stored.filter(pa.array(_matches(stored, PER_SHARE_PARTITION_RULES)))
    kept = ours.take(rows_by_key(ours, touched_keys, list(KEY), "left anti"))
    found = findings_of(
        PER_SHARE_PARTITION_RULES,
        {
            "segment_starts": segment_starts,
            "delivery_counts": delivery_counts,
            "delivery_count_limit": delivery_count_limit,
        },
    )
    return concat([kept, found] if found is not None else [kept])
