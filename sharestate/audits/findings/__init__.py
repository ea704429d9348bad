"""The `findings` table: data-quality problems, one row each, with a severity and an actionable
message. One row per problem, with an `affected` count, so a table of millions of records
gives a readable list: per-record rows only where each record matters (replay errors, gaps in
`__share_group_state`), per share-partition, group or input otherwise.

Every finding is one rule (`registry.finding_rule`), and `RULES` below is the one table of
them: the table is built from it, the run summary counts by its severities, the docs list it
(`catalog`) and the tests check it. To add a finding: add its code to `FindingCode`, write
its rule in the module of the table it reads, list the rule in `RULES`, and write its Arrow
twin (`sharestate.audits.findings_arrow`, what small runs and incremental runs use).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any, Final

from pyspark.sql import DataFrame

from sharestate.audits.findings.groups import (
    partition_not_initialized,
    state_for_deleted_group,
    state_for_unknown_group,
    stuck_deleting,
    stuck_initializing,
)
from sharestate.audits.findings.lag import end_offset_missing, negative_lag
from sharestate.audits.findings.placement import (
    state_partition_check_skipped,
    wrong_state_partition,
    wrong_state_partition_findings,
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
    SEVERITIES,
    FindingCode,
    FindingInputs,
    FindingRule,
    Severity,
    Source,
)
from sharestate.audits.findings.snapshots import (
    state_without_snapshot,
    update_after_tombstone,
    update_before_snapshot,
)
from sharestate.audits.findings.state import delivery_count_above_limit, spso_stalled

__all__ = [
    "FINDINGS_SCHEMA",
    "PER_RECORD_INPUTS",
    "PER_RECORD_RULES",
    "PER_SHARE_PARTITION_RULES",
    "PLACEMENT_RULES",
    "RULES",
    "SEVERITIES",
    "STATE_SIZED_RULES",
    "FindingCode",
    "FindingDescription",
    "FindingInputs",
    "FindingRule",
    "Severity",
    "Source",
    "catalog",
    "findings_of",
    "findings_table",
    "per_record_findings",
    "per_share_partition_findings",
    "wrong_state_partition_findings",
]

#: Every finding rule, once, in the order the `findings` table unions them.
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


def _union(parts: Sequence[DataFrame]) -> DataFrame:
    return reduce(DataFrame.unionByName, parts)


def per_record_findings(inputs: FindingInputs, stored: DataFrame | None = None) -> DataFrame:
    """The rows of the per-record rules. `stored`: an earlier run's `findings`, whose rows of
    these rules are kept; `inputs` then hold only the new history and positions (with each
    partition's last stored position, so a gap across the boundary is found)."""
    parts = []
    if stored is not None:
        kept = reduce(lambda a, b: a | b, [rule.matches() for rule in PER_RECORD_RULES])
        parts.append(stored.filter(kept).select(*FINDINGS_SCHEMA.fieldNames()))
    for rule in PER_RECORD_RULES:
        rows = rule.run(inputs)
        assert rows is not None  # per-record inputs are never missing
        parts.append(rows)
    return _union(parts)


def per_share_partition_findings(
    stored: DataFrame,
    touched_keys: DataFrame,
    *,
    segment_starts: DataFrame,
    delivery_counts: DataFrame,
    state: DataFrame,
    delivery_count_limit: int,
) -> DataFrame:
    """The rows of the per-share-partition rules after an incremental run: `stored` (an
    earlier run's `findings`) keeps those of the share-partitions not in `touched_keys`
    (group_id, topic_id, partition), and the rules find those of the touched ones from the
    inputs they read (`PER_SHARE_PARTITION_INPUTS`; `segment_starts` and `delivery_counts`
    holding the touched share-partitions' rows). It needs nothing the other rules read, so
    it can run as soon as the touched share-partitions' segments are known."""
    inputs = {
        "segment_starts": segment_starts,
        "delivery_counts": delivery_counts,
        "state": state,
        "delivery_count_limit": delivery_count_limit,
    }
    kept = reduce(lambda a, b: a | b, [rule.matches() for rule in PER_SHARE_PARTITION_RULES])
    parts = [
        stored.filter(kept)
        .join(touched_keys, ["group_id", "topic_id", "partition"], "left_anti")
        .select(*FINDINGS_SCHEMA.fieldNames())
    ]
    for rule in PER_SHARE_PARTITION_RULES:
        rows = rule.run_with(inputs)
        assert rows is not None  # their inputs are never missing
        parts.append(rows)
    return _union(parts)


def findings_of(rules: Sequence[FindingRule[Any]], inputs: Mapping[str, Any]) -> DataFrame | None:
    """The rows of those of `rules` whose inputs are there, in one DataFrame (None when
    none is). `inputs`: a value (or None) for each `FindingInputs` field the rules read."""
    parts = [rows for rule in rules if (rows := rule.run_with(inputs)) is not None]
    return _union(parts) if parts else None


def findings_table(
    inputs: FindingInputs,
    per_record: DataFrame | None = None,
    per_share_partition: DataFrame | None = None,
) -> DataFrame:
    """Every finding, one row each (`FINDINGS_SCHEMA`): the rows of every rule in `RULES`
    whose inputs are there, with `per_record` (`per_record_findings`) in place of the
    per-record rules' rows and `per_share_partition` (`per_share_partition_findings`) in
    place of the per-share-partition rules' rows when given."""
    if per_record is None:
        per_record = per_record_findings(inputs)
    parts = []
    for rule in RULES:
        if rule.per_record:
            if rule is PER_RECORD_RULES[0]:
                parts.append(per_record)
        elif rule.per_share_partition and per_share_partition is not None:
            if rule is PER_SHARE_PARTITION_RULES[0]:
                parts.append(per_share_partition)
        elif (rows := rule.run(inputs)) is not None:
            parts.append(rows)
    # A union of many small parts has a partition per part and shuffle partition: one file
    # each when written. Findings are few; one partition writes one file. repartition, not
    # coalesce: coalesce(1) would pull every part's upstream work (scans of the history)
    # into a single task, with no parallelism left.
    return _union(parts).repartition(1)
