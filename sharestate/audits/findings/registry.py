"""What a finding is: its code, severity and source, the `findings` table's columns, and the
rule type every finding is registered with.

A rule is one small function over Arrow tables, decorated with `finding_rule(code,
severity, ...)`. Its parameters name the inputs it reads (fields of `FindingInputs`); it
returns the rows it found with a message and where each points (`FoundRows`); the rule
stamps the code, the severity and the source on them. Its docstring says what the finding
means and what to do about it. `sharestate.audits.findings.RULES` lists every rule once, in
the order the table is built. Pure pyarrow: no Spark.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, Final, Generic, ParamSpec, TypeAlias, cast

import pyarrow as pa


class Severity(StrEnum):
    """How much a finding matters (the `severity` column)."""

    #: The replay cannot match Kafka's.
    ERROR = "error"
    #: The data or the cluster needs a look.
    WARNING = "warning"
    #: Expected, listed so that completeness can be judged.
    INFO = "info"


#: The severities, most severe first (the run summary counts findings by these).
SEVERITIES: Final = tuple(severity.value for severity in Severity)


class FindingCode(StrEnum):
    """The `code` column: what was found. The values are data in written tables: never
    rename one (add codes instead)."""

    DECODE_QUARANTINE = "decode_quarantine"
    REPLAY_ERROR = "replay_error"
    SOURCE_OFFSET_GAP = "source_offset_gap"
    UPDATE_BEFORE_SNAPSHOT = "update_before_snapshot"
    STATE_WITHOUT_SNAPSHOT = "state_without_snapshot"
    UPDATE_AFTER_TOMBSTONE = "update_after_tombstone"
    WRONG_STATE_PARTITION = "wrong_state_partition"
    STATE_PARTITION_CHECK_SKIPPED = "state_partition_check_skipped"
    DELIVERY_COUNT_ABOVE_LIMIT = "delivery_count_above_limit"
    SPSO_STALLED = "spso_stalled"
    STATE_FOR_UNKNOWN_GROUP = "state_for_unknown_group"
    STATE_FOR_DELETED_GROUP = "state_for_deleted_group"
    PARTITION_NOT_INITIALIZED = "partition_not_initialized"
    STUCK_INITIALIZING = "stuck_initializing"
    STUCK_DELETING = "stuck_deleting"
    NEGATIVE_LAG = "negative_lag"
    END_OFFSET_MISSING = "end_offset_missing"
    BACKFILL_APPLIED = "backfill_applied"


class Source(StrEnum):
    """The `source` column: the export a finding points into (the names the job's inputs and
    the quarantine use)."""

    SHARE_STATE = "share_state"
    CONSUMER_OFFSETS = "consumer_offsets"


#: The `findings` table's columns, in order (a Spark schema, where one is needed, is this
#: one converted: `pyspark.sql.pandas.types.from_arrow_schema`).
FINDINGS_SCHEMA: Final = pa.schema(
    [
        ("severity", pa.string()),
        ("code", pa.string()),
        ("group_id", pa.string()),
        ("topic_id", pa.string()),
        ("partition", pa.int32()),
        ("source", pa.string()),
        ("source_partition", pa.int32()),
        ("source_offset", pa.int64()),
        ("affected", pa.int64()),
        ("message", pa.string()),
    ]
)


@dataclass(frozen=True)
class FindingInputs:
    """What the rules read, as Arrow tables (scalars as they are). A rule's parameters are
    names of these fields; it runs when every parameter without a default has a value (a
    rule of the group metadata runs only with `--consumer-offsets`, one of the lag only with
    `--end-offsets`). Callers give the inputs as a mapping of these names."""

    #: Per-record inputs (`PER_RECORD_INPUTS`): in an incremental run only the new history
    #: rows, and the new exported positions plus each partition's last stored one. Only
    #: per-record rules read them; the earlier run's rows of those rules are kept.
    history: pa.Table
    share_state_positions: pa.Table
    #: `records.quarantine_kinds`: the quarantined rows counted per (source, reason_kind).
    quarantine_kinds: pa.Table
    #: Per-share-partition-only inputs (`PER_SHARE_PARTITION_ONLY_INPUTS`): in an incremental
    #: run only the touched share-partitions' rows. `segment_starts`:
    #: `segments_arrow.segment_starts` of `share_partition_segments`, a row per
    #: share-partition and segment.
    segment_starts: pa.Table
    delivery_counts: pa.Table
    #: `share_partition_placements`: a row per share-partition and state-topic partition.
    placements: pa.Table
    state: pa.Table
    delivery_count_limit: int
    stall_span_seconds: float
    state_topic_partitions: int | None = None
    #: `gaps_arrow.position_extents` of the `__consumer_offsets` export.
    consumer_offsets_extents: pa.Table | None = None
    #: The group records; the rules read only their latest `source_timestamp`.
    group_records: pa.Table | None = None
    groups: pa.Table | None = None
    lag: pa.Table | None = None
    #: An incremental run's rows that arrived below the checkpoint (source,
    #: source_partition, source_offset); a full run has none.
    backfilled: pa.Table | None = None


#: The inputs that hold only the new rows in an incremental run (see `FindingInputs`).
PER_RECORD_INPUTS: Final = frozenset({"history", "share_state_positions"})
#: The inputs a per-share-partition rule may read: tables of rows per share-partition, and
#: an option an incremental run keeps equal.
PER_SHARE_PARTITION_INPUTS: Final = frozenset(
    {"segment_starts", "delivery_counts", "state", "delivery_count_limit"}
)
#: The inputs only per-share-partition rules read: an incremental run holds only the touched
#: share-partitions' rows there (a rule over every share-partition reads `placements` or
#: `state`).
PER_SHARE_PARTITION_ONLY_INPUTS: Final = frozenset({"segment_starts", "delivery_counts"})
INPUT_NAMES: Final = frozenset(f.name for f in fields(FindingInputs))

#: A value of a finding row's column: a column of the found rows (by name), one value for
#: every row (a literal; None is null), or an array with a value per row.
Value: TypeAlias = str | int | pa.Array | pa.ChunkedArray | None

#: Where a row of a live share-partition (`share_partition_state`, `share_partition_lag`)
#: points: its share-partition and its last `__share_group_state` record, one each.
AT_LAST_STATE_RECORD: Final[Mapping[str, Value]] = {
    "group_id": "group_id",
    "topic_id": "topic_id",
    "partition": "partition",
    "source_partition": "last_source_partition",
    "source_offset": "last_source_offset",
    "affected": 1,
}


@dataclass(frozen=True)
class FoundRows:
    """What a rule returns: the rows it found, the message of each, where each points
    (`where`: keys `group_id`, `topic_id`, `partition`, `source_partition`,
    `source_offset`, `affected`; a string names a column of `rows`, an int is a literal, an
    array has a value per row, a missing key is null). `severity` is given only by a rule
    registered with several severities (it picks one per row), `source` only by a rule
    registered without a source (null when not given)."""

    rows: pa.Table
    message: pa.Array | pa.ChunkedArray
    where: Mapping[str, Value] = field(default_factory=dict)
    severity: pa.Array | pa.ChunkedArray | None = None
    source: pa.Array | pa.ChunkedArray | None = None


def _column(rows: pa.Table, value: Value, dtype: pa.DataType) -> pa.Array | pa.ChunkedArray:
    if isinstance(value, str):
        return rows.column(value).cast(dtype)
    if value is None or isinstance(value, int):
        return pa.array([value] * rows.num_rows, dtype)
    return value.cast(dtype)


def _text(value: Value, n: int) -> pa.Array | pa.ChunkedArray:
    if value is None or isinstance(value, str):
        return pa.array([value] * n, pa.string())
    if isinstance(value, int):
        raise TypeError("a source is text")
    return value.cast(pa.string())


P = ParamSpec("P")


@dataclass(frozen=True)
class FindingRule(Generic[P]):
    """One kind of finding: its code, the severities its rows may have, the source they point
    into (None: per row, or none), and the function that finds them. Call it with the
    function's arguments to get the rows as `findings` rows (`FINDINGS_SCHEMA`)."""

    code: FindingCode
    severities: tuple[Severity, ...]
    find: Callable[P, FoundRows]
    source: Source | None = None
    #: Each row is one record or one gap of `__share_group_state`: an incremental run keeps
    #: the earlier run's rows and finds those of the new rows only.
    per_record: bool = False
    #: Each row is about one share-partition and follows from that share-partition's rows
    #: of the inputs alone: an incremental run keeps the earlier run's rows of the
    #: share-partitions it does not touch and finds those of the touched ones.
    per_share_partition: bool = False

    @property
    def name(self) -> str:
        return self.find.__name__

    @property
    def description(self) -> str:
        """What the finding means and what to do (the function's docstring)."""
        return inspect.getdoc(self.find) or ""

    @property
    def inputs(self) -> tuple[str, ...]:
        """The `FindingInputs` fields the rule reads."""
        return tuple(inspect.signature(self.find).parameters)

    @property
    def required_inputs(self) -> tuple[str, ...]:
        """The inputs without which the rule does not run."""
        parameters = inspect.signature(self.find).parameters.values()
        return tuple(p.name for p in parameters if p.default is inspect.Parameter.empty)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> pa.Table:
        return self.rows(self.find(*args, **kwargs))

    def run(self, inputs: Mapping[str, Any]) -> pa.Table | None:
        """The rule's rows from `inputs` (a value, or None, for each `FindingInputs` field
        it reads; a missing one counts as None); None when an input it needs is None."""
        values = {name: inputs.get(name) for name in self.inputs}
        if any(values[name] is None for name in self.required_inputs):
            return None
        return self.rows(cast(Callable[..., FoundRows], self.find)(**values))

    def check_found(self, *, severity_given: bool, source_given: bool) -> None:
        """What a rule's found rows give must fit its registration: a severity only when it
        has several (picked per row), a source only when it has none registered."""
        if severity_given != (len(self.severities) > 1):
            raise ValueError(
                f"finding rule {self.name}: a rule with one severity leaves it to the"
                " registration; one with several picks it per row"
            )
        if self.source is not None and source_given:
            raise ValueError(f"finding rule {self.name}: its source is registered")

    def rows(self, found: FoundRows) -> pa.Table:
        """`found` as `findings` rows, with this rule's code, severity and source."""
        self.check_found(
            severity_given=found.severity is not None, source_given=found.source is not None
        )
        n = found.rows.num_rows
        severity = found.severity
        if severity is None:
            severity = pa.array([self.severities[0].value] * n, pa.string())
        source: Value = found.source
        if self.source is not None:
            source = self.source.value
        columns: dict[str, Any] = {
            "severity": severity.cast(pa.string()),
            "code": pa.array([self.code.value] * n, pa.string()),
        }
        for name in ("group_id", "topic_id", "partition"):
            columns[name] = _column(found.rows, found.where.get(name), _type(name))
        columns["source"] = _text(source, n)
        for name in ("source_partition", "source_offset", "affected"):
            columns[name] = _column(found.rows, found.where.get(name), _type(name))
        columns["message"] = found.message.cast(pa.string())
        return pa.table(columns, schema=FINDINGS_SCHEMA)


def _type(name: str) -> pa.DataType:
    return FINDINGS_SCHEMA.field(name).type


def finding_rule(
    code: FindingCode,
    *severities: Severity,
    source: Source | None = None,
    per_record: bool = False,
    per_share_partition: bool = False,
) -> Callable[[Callable[P, FoundRows]], FindingRule[P]]:
    """Registers the decorated function as the rule of `code` with `severities` (one, or the
    several it picks from per row). Checked here, at import: a docstring, inputs that are
    `FindingInputs` fields, per-record inputs read by per-record rules only, and
    per-share-partition rules reading per-share-partition inputs only (and they alone
    reading `PER_SHARE_PARTITION_ONLY_INPUTS`)."""

    def register(find: Callable[P, FoundRows]) -> FindingRule[P]:
        rule = FindingRule(code, tuple(severities), find, source, per_record, per_share_partition)
        problems = []
        if not severities:
            problems.append("no severity")
        if not rule.description:
            problems.append("no docstring saying what it means and what to do")
        if unknown := set(rule.inputs) - INPUT_NAMES:
            problems.append(f"inputs {sorted(unknown)} are not FindingInputs fields")
        if per_record != bool(PER_RECORD_INPUTS & set(rule.inputs)):
            problems.append("per-record inputs are read by per-record rules, and only by them")
        if per_record and source is None:
            problems.append("a per-record rule names its source (its stored rows are kept)")
        if per_share_partition and not set(rule.inputs) <= PER_SHARE_PARTITION_INPUTS:
            problems.append(
                "a per-share-partition rule reads only per-share-partition tables"
                f" ({', '.join(sorted(PER_SHARE_PARTITION_INPUTS))})"
            )
        if not per_share_partition and (only := PER_SHARE_PARTITION_ONLY_INPUTS & set(rule.inputs)):
            problems.append(
                f"{', '.join(sorted(only))}: read by per-share-partition rules only (an"
                " incremental run holds the touched share-partitions' rows there)"
            )
        if problems:
            raise TypeError(f"finding rule {find.__name__} ({code}): {'; '.join(problems)}")
        return rule

    return register
