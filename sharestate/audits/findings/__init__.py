"""The `findings` table: data-quality problems, one row each, with a severity and an actionable
message. One row per problem, with an `affected` count, so a table of millions of records
gives a readable list: per-record rows only where each record matters (replay errors, gaps in
`__share_group_state`), per share-partition, group or input otherwise.

Every finding is one rule (`registry.finding_rule`): one function over Arrow tables, in the
module of the table it reads. `RULES` below is the one table of them: the findings table is
built from it (`findings_table`), the run summary counts by its severities, the docs list it
(`catalog`) and the tests check it. A rule runs wherever its inputs are: on the driver, or in
Spark's tasks over partitions of an input that hold whole keys (their rows then given to
`findings_table` as `found`). To add a finding: add its code to `FindingCode`, write its
rule in the module of the table it reads, and list it in `RULES`.

Pure pyarrow and numpy: no Spark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sharestate.arrow_keys import rows_by_key
from sharestate.audits.findings.groups import (
    partition_not_initialized,
    state_for_deleted_group,
    state_for_unknown_group,
    stuck_deleting,
    stuck_initializing,
)
from sharestate.audits.findings.lag import end_offset_missing, negative_lag
from sharestate.audits.findings.placement import (
    KEY_HASH,
    state_partition_check_skipped,
    wrong_state_partition,
)
from sharestate.audits.findings.records import (
    backfill_applied,
    consumer_offsets_gap,
    decode_quarantine,
    replay_error,
    share_state_gap,
)
from sharestate.audits.findings.registry import (
    FINDINGS_SCHEMA,
    PER_RECORD_INPUTS,
    PER_SHARE_PARTITION_INPUTS,
    PER_SHARE_PARTITION_ONLY_INPUTS,
    SEVERITIES,
    FindingCode,
    FindingInputs,
    FindingRule,
    FoundRows,
    Severity,
    Source,
    finding_rule,
)
from sharestate.audits.findings.rows import concat
from sharestate.audits.findings.snapshots import (
    state_without_snapshot,
    update_after_tombstone,
    update_before_snapshot,
)
from sharestate.audits.findings.state import delivery_count_above_limit, spso_stalled
from sharestate.decode.columns import KEY
from sharestate.replay.fold import LATEST_TIMESTAMP, SINCE

__all__ = [
    "FINDINGS_SCHEMA",
    "KEY_HASH",
    "PER_RECORD_INPUTS",
    "PER_RECORD_RULES",
    "PER_SHARE_PARTITION_INPUTS",
    "PER_SHARE_PARTITION_ONLY_INPUTS",
    "PER_SHARE_PARTITION_RULES",
    "PLACEMENT_RULES",
    "RULES",
    "SEVERITIES",
    "STATE_COLUMNS",
    "STATE_SIZED_RULES",
    "FindingCode",
    "FindingDescription",
    "FindingInputs",
    "FindingRule",
    "FoundRows",
    "Severity",
    "Source",
    "catalog",
    "concat",
    "finding_rule",
    "findings_of",
    "findings_table",
    "per_share_partition_findings",
    "rows_of",
]

#: Every finding rule, once, in the order the `findings` table lists their rows.
RULES: Final[tuple[FindingRule[Any], ...]] = (
    decode_quarantine,
    replay_error,
    share_state_gap,
    update_before_snapshot,
    state_without_snapshot,
    update_after_tombstone,
    wrong_state_partition,
    state_partition_check_skipped,
    delivery_count_above_limit,
    spso_stalled,
    consumer_offsets_gap,
    state_for_unknown_group,
    state_for_deleted_group,
    partition_not_initialized,
    stuck_initializing,
    stuck_deleting,
    negative_lag,
    end_offset_missing,
    backfill_applied,
)
#: The rules whose rows are one `__share_group_state` record or gap each: an incremental run
#: keeps the earlier run's rows and adds those of the new records.
PER_RECORD_RULES: Final = tuple(rule for rule in RULES if rule.per_record)
#: The rules whose rows are each about one share-partition and follow from its own rows: an
#: incremental run keeps the earlier run's rows of the untouched ones.
PER_SHARE_PARTITION_RULES: Final = tuple(rule for rule in RULES if rule.per_share_partition)
#: The rules that read the placements, which an incremental run knows only once the touched
#: share-partitions' segments are written.
PLACEMENT_RULES: Final = tuple(rule for rule in RULES if "placements" in rule.inputs)
#: Every other rule: each reads state-sized inputs (the whole state, the groups, the lag, the
#: quarantine's counts, the extents) that an incremental run knows right after its replay.
STATE_SIZED_RULES: Final = tuple(
    rule
    for rule in RULES
    if not (rule.per_record or rule.per_share_partition or rule in PLACEMENT_RULES)
)
#: The columns of `share_partition_state` the rules read: a caller bringing a big state to
#: the rules needs no more of it.
STATE_COLUMNS: Final = (
    *KEY,
    "deleted",
    "last_source_partition",
    "last_source_offset",
    "effective_start_offset",
    "available_offsets",
    "acquired_offsets",
    SINCE,
    LATEST_TIMESTAMP,
)


@dataclass(frozen=True)
class FindingDescription:
    """One code as the docs list it: the severities and sources its rows can have, and what
    it means and what to do (one paragraph per rule of the code)."""

    code: FindingCode
    severities: tuple[Severity, ...]
    sources: tuple[Source | None, ...]
    description: str


def catalog() -> tuple[FindingDescription, ...]:
    """Every finding code with what its rules say, in `FindingCode` order."""
    out = []
    for code in FindingCode:
        rules = [rule for rule in RULES if rule.code == code]
        severities = {severity for rule in rules for severity in rule.severities}
        out.append(
            FindingDescription(
                code=code,
                severities=tuple(s for s in Severity if s in severities),
                sources=tuple(rule.source for rule in rules),
                description="\n\n".join(rule.description for rule in rules),
            )
        )
    return tuple(out)


def findings_table(
    inputs: Mapping[str, Any], found: Mapping[str, pa.Table] | None = None
) -> pa.Table:
    """Every finding (`FINDINGS_SCHEMA`), in `RULES` order: the rows of each rule whose
    inputs are there. `inputs`: a value (or None) for each `FindingInputs` field the rules
    read, the tables as Arrow. `found`: rule name -> that rule's rows found already (by
    Spark's tasks over a partitioned input, say), taken instead of running the rule."""
    found = found or {}
    if unknown := set(found) - {rule.name for rule in RULES}:
        raise ValueError(f"rows given for no finding rule: {', '.join(sorted(unknown))}")
    parts = []
    for rule in RULES:
        rows = found[rule.name] if rule.name in found else rule.run(inputs)
        if rows is not None:
            parts.append(rows)
    return concat(parts)


def findings_of(rules: Sequence[FindingRule[Any]], inputs: Mapping[str, Any]) -> pa.Table | None:
    """The rows of those of `rules` whose inputs are there, in one table (None when none
    is)."""
    parts = [rows for rule in rules if (rows := rule.run(inputs)) is not None]
    return concat(parts) if parts else None


def rows_of(findings: pa.Table, rules: Sequence[FindingRule[Any]]) -> pa.Array:
    """Per row of `findings`, whether it is one of `rules`' (its code, and its source where
    the rule has one)."""
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
    """The rows of the per-share-partition rules after an incremental run: `stored` (an
    earlier run's `findings`) keeps those of the share-partitions not in `touched_keys`
    (group_id, topic_id, partition), and the rules find those of the touched ones
    (`segment_starts` and `delivery_counts` holding their rows). It needs nothing the other
    rules read, so it can run as soon as the touched share-partitions' segments are
    known."""
    stored = stored.select(FINDINGS_SCHEMA.names).cast(FINDINGS_SCHEMA)
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
