"""What a finding is: its code, severity and source, the `findings` table's columns, and the
rule type every finding is registered with.

A rule is one small function, decorated with `finding_rule(code, severity, ...)`. Its
parameters name the inputs it reads (fields of `FindingInputs`); it returns the rows it found
with a message and where each points (`Found`); the rule stamps the code, the severity and
the source on them. Its docstring says what the finding means and what to do about it.
`sharestate.audits.findings.RULES` lists every rule once, in the order the table is built.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, Final, Generic, ParamSpec, TypedDict, cast

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T


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


#: The `findings` table's columns, in order.
FINDINGS_SCHEMA: Final = T.StructType(
    [
        T.StructField("severity", T.StringType()),
        T.StructField("code", T.StringType()),
        T.StructField("group_id", T.StringType()),
        T.StructField("topic_id", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("source", T.StringType()),
        T.StructField("source_partition", T.IntegerType()),
        T.StructField("source_offset", T.LongType()),
        T.StructField("affected", T.LongType()),
        T.StructField("message", T.StringType()),
    ]
)


@dataclass(frozen=True)
class FindingInputs:
    """What the rules read. A rule's parameters are names of these fields; it runs when every
    parameter without a default has a value here (a rule of the group metadata runs only with
    `--consumer-offsets`, one of the lag only with `--end-offsets`)."""

    #: Per-record inputs (`PER_RECORD_INPUTS`): in an incremental run only the new history
    #: rows, and the new exported positions plus each partition's last stored one. Only
    #: per-record rules read them; the earlier run's rows of those rules are kept.
    history: DataFrame
    share_state_positions: DataFrame
    #: `quarantine_kinds`: the quarantined rows counted per (source, reason_kind).
    quarantine_kinds: DataFrame
    #: Per-share-partition-only inputs (`PER_SHARE_PARTITION_ONLY_INPUTS`): in an incremental
    #: run only the touched share-partitions' rows. `segment_starts`: `snapshots.segment_starts`
    #: of `share_partition_segments`, a row per share-partition and segment.
    segment_starts: DataFrame
    delivery_counts: DataFrame
    #: `share_partition_placements`: a row per share-partition and state-topic partition.
    placements: DataFrame
    state: DataFrame
    delivery_count_limit: int
    stall_span_seconds: float
    state_topic_partitions: int | None = None
    #: `position_extents` of the `__consumer_offsets` export.
    consumer_offsets_extents: DataFrame | None = None
    #: The group records; the rules read only their latest `source_timestamp`.
    group_records: DataFrame | None = None
    groups: DataFrame | None = None
    lag: DataFrame | None = None
    #: An incremental run's rows that arrived below the checkpoint (source,
    #: source_partition, source_offset); a full run has none.
    backfilled: DataFrame | None = None


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
_INPUT_NAMES: Final = frozenset(field.name for field in fields(FindingInputs))


class Where(TypedDict, total=False):
    """Where each found row points, and how many things it stands for (`affected`): a string
    names a column of the rows, a Column is used as it is, a missing key is null."""

    group_id: str | Column | None
    topic_id: str | Column | None
    partition: str | Column | None
    source_partition: str | Column | None
    source_offset: str | Column | None
    affected: str | Column | None


def at_last_state_record() -> Where:
    """Where a row of a live share-partition (`share_partition_state`, `share_partition_lag`)
    points: its share-partition and its last `__share_group_state` record, one each."""
    return Where(
        group_id="group_id",
        topic_id="topic_id",
        partition="partition",
        source_partition="last_source_partition",
        source_offset="last_source_offset",
        affected=F.lit(1),
    )


@dataclass(frozen=True)
class Found:
    """What a rule returns: the rows it found, the message of each, where each points.
    `severity` is given only by a rule registered with several severities (it picks one per
    row), `source` only by a rule registered without a source (null when not given)."""

    rows: DataFrame
    message: Column
    where: Where
    severity: Column | None = None
    source: Column | None = None


P = ParamSpec("P")


def _as_column(value: str | Column | None, dtype: T.DataType) -> Column:
    if value is None:
        return F.lit(None).cast(dtype)
    column = F.col(value) if isinstance(value, str) else value
    return column.cast(dtype)


@dataclass(frozen=True)
class FindingRule(Generic[P]):
    """One kind of finding: its code, the severities its rows may have, the source they point
    into (None: per row, or none), and the function that finds them. Call it with the
    function's arguments to get the rows as `findings` rows (`FINDINGS_SCHEMA`)."""

    code: FindingCode
    severities: tuple[Severity, ...]
    find: Callable[P, Found]
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

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> DataFrame:
        return self.rows(self.find(*args, **kwargs))

    def run(self, inputs: FindingInputs) -> DataFrame | None:
        """The rule's rows from `inputs`; None when an input it needs is not there."""
        return self.run_with({name: getattr(inputs, name) for name in self.inputs})

    def run_with(self, inputs: Mapping[str, Any]) -> DataFrame | None:
        """The rule's rows from `inputs` (a value for each `FindingInputs` field it reads);
        None when an input it needs is None."""
        values = {name: inputs[name] for name in self.inputs}
        if any(values[name] is None for name in self.required_inputs):
            return None
        return self.rows(cast(Callable[..., Found], self.find)(**values))

    def matches(self) -> Column:
        """Whether a `findings` row is one of this rule's."""
        same_code = F.col("code") == F.lit(self.code.value)
        if self.source is None:
            return same_code
        return same_code & (F.col("source") == F.lit(self.source.value))

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

    def rows(self, found: Found) -> DataFrame:
        """`found` as `findings` rows, with this rule's code, severity and source."""
        self.check_found(
            severity_given=found.severity is not None, source_given=found.source is not None
        )
        severity = found.severity
        if severity is None:
            severity = F.lit(self.severities[0].value)
        source = found.source
        if self.source is not None:
            source = F.lit(self.source.value)
        elif source is None:
            source = F.lit(None)
        types = {f.name: f.dataType for f in FINDINGS_SCHEMA.fields}
        where: dict[str, Any] = dict(found.where)
        return found.rows.select(
            severity.alias("severity"),
            F.lit(self.code.value).alias("code"),
            _as_column(where.get("group_id"), types["group_id"]).alias("group_id"),
            _as_column(where.get("topic_id"), types["topic_id"]).alias("topic_id"),
            _as_column(where.get("partition"), types["partition"]).alias("partition"),
            source.cast("string").alias("source"),
            _as_column(where.get("source_partition"), types["source_partition"]).alias(
                "source_partition"
            ),
            _as_column(where.get("source_offset"), types["source_offset"]).alias("source_offset"),
            _as_column(where.get("affected"), types["affected"]).alias("affected"),
            found.message.alias("message"),
        )


def finding_rule(
    code: FindingCode,
    *severities: Severity,
    source: Source | None = None,
    per_record: bool = False,
    per_share_partition: bool = False,
) -> Callable[[Callable[P, Found]], FindingRule[P]]:
    """Registers the decorated function as the rule of `code` with `severities` (one, or the
    several it picks from per row). Checked here, at import: a docstring, inputs that are
    `FindingInputs` fields, per-record inputs read by per-record rules only, and
    per-share-partition rules reading per-share-partition inputs only (and they alone
    reading `PER_SHARE_PARTITION_ONLY_INPUTS`)."""

    def register(find: Callable[P, Found]) -> FindingRule[P]:
        rule = FindingRule(code, tuple(severities), find, source, per_record, per_share_partition)
        problems = []
        if not severities:
            problems.append("no severity")
        if not rule.description:
            problems.append("no docstring saying what it means and what to do")
        if unknown := set(rule.inputs) - _INPUT_NAMES:
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
