"""What every finding rule's Arrow twin shares: the rows it found as `findings` rows
(`FoundRows` -> `rule_rows`, the twin of `registry.FindingRule.rows`), message text as
Spark's `columns.message` prints values, ages and hours as `columns.age_at_least` and
`columns.hours_between` compute them, and the registry of twins (`twin_of`).

A twin takes the same parameters as its Spark rule, as Arrow tables (scalars as they are),
and returns the same rows. Found rows are few (a row per problem), so messages are built
value by value in Python. Pure pyarrow: no Spark.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Final, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from sharestate.audits.findings.registry import FINDINGS_SCHEMA, FindingRule

#: The `findings` table's columns in Arrow (`FINDINGS_SCHEMA`).
FINDINGS_ARROW_SCHEMA: Final = pa.schema(
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
assert FINDINGS_ARROW_SCHEMA.names == FINDINGS_SCHEMA.fieldNames()

#: A value of a finding row's column: a column of the found rows (by name), one value for
#: every row (a literal; None is null), or an array with a value per row.
Value: TypeAlias = str | int | pa.Array | pa.ChunkedArray | None
#: A part of a message: literal text, or an array with a value per row.
Part: TypeAlias = str | pa.Array | pa.ChunkedArray


#: Where a row of a live share-partition points (`registry.at_last_state_record`): its
#: share-partition and its last `__share_group_state` record, one each.
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
    """What a twin found (the twin of `registry.Found`): the rows, the message of each,
    where each points (`where`: `Where`'s keys; a string names a column of `rows`, an int
    is a literal, an array has a value per row), and `severity` / `source` per row where
    the rule picks them per row."""

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


def rule_rows(rule: FindingRule[Any], found: FoundRows) -> pa.Table:
    """`found` as `findings` rows with `rule`'s code, severity and source (as
    `FindingRule.rows` stamps them)."""
    rule.check_found(
        severity_given=found.severity is not None, source_given=found.source is not None
    )
    n = found.rows.num_rows
    severity = found.severity
    if severity is None:
        severity = pa.array([rule.severities[0].value] * n, pa.string())
    source: Value = found.source
    if rule.source is not None:
        source = rule.source.value
    columns: dict[str, Any] = {
        "severity": severity.cast(pa.string()),
        "code": pa.array([rule.code.value] * n, pa.string()),
    }
    for name in ("group_id", "topic_id", "partition"):
        columns[name] = _column(found.rows, found.where.get(name), _type(name))
    columns["source"] = _literal_or_array(source, n)
    for name in ("source_partition", "source_offset", "affected"):
        columns[name] = _column(found.rows, found.where.get(name), _type(name))
    columns["message"] = found.message.cast(pa.string())
    return pa.table(columns, schema=FINDINGS_ARROW_SCHEMA)


def _literal_or_array(value: Value, n: int) -> pa.Array | pa.ChunkedArray:
    if value is None or isinstance(value, str):
        return pa.array([value] * n, pa.string())
    if isinstance(value, int):
        raise TypeError("a source is text")
    return value.cast(pa.string())


def _type(name: str) -> pa.DataType:
    return FINDINGS_ARROW_SCHEMA.field(name).type


def empty_findings() -> pa.Table:
    return FINDINGS_ARROW_SCHEMA.empty_table()


# --- message text, as Spark casts values to strings -------------------------------------------


def text_of(value: Any) -> str:
    """One value as Spark's `cast(... as string)` prints it in a UTC session, `?` for null
    (`columns.message`)."""
    if value is None:
        return "?"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return _timestamp_text(value)
    if isinstance(value, float):
        return java_double_text(value)
    if isinstance(value, Decimal):
        return str(value)
    return str(value)


def _timestamp_text(moment: datetime) -> str:
    """`yyyy-MM-dd HH:mm:ss`, with the fraction of a second without trailing zeros (as
    Spark prints a timestamp; the job's session is in UTC)."""
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if moment.microsecond:
        text += "." + f"{moment.microsecond:06d}".rstrip("0")
    return text


def java_double_text(value: float) -> str:
    """A double as Java's `Double.toString` prints it (what Spark's cast to string gives):
    plain between 10^-3 and 10^7, `d.dddE<n>` outside."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    magnitude = abs(value)
    if value == 0 or 1e-3 <= magnitude < 1e7:
        text = repr(value)
        return text if "." in text or "e" in text else text + ".0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    shown = "".join(map(str, digits))
    power = exponent + len(shown) - 1
    mantissa = shown[0] + "." + (shown[1:] or "0")
    return ("-" if sign else "") + f"{mantissa}E{power}"


def message(n: int, *parts: Part) -> pa.Array:
    """The twin of `columns.message`: per row, the literal parts and the row's values
    (null as `?`) joined."""
    columns: list[list[str]] = []
    for part in parts:
        if isinstance(part, str):
            columns.append([part] * n)
        else:
            values = part.to_pylist()
            if len(values) != n:
                raise ValueError(f"a message part has {len(values)} values for {n} rows")
            columns.append([text_of(v) for v in values])
    return pa.array(
        ["".join(row) for row in zip(*columns, strict=True)] if columns else [""] * n, pa.string()
    )


def choose(condition: pa.Array | pa.ChunkedArray, when: str, otherwise: str) -> pa.Array:
    """Per row, `when` where `condition` is true, else `otherwise` (null counts as false,
    as in Spark's `F.when(...).otherwise(...)`)."""
    flags = pc.fill_null(condition, False).to_pylist()
    return pa.array([when if flag else otherwise for flag in flags], pa.string())


# --- time, as columns.age_at_least and columns.hours_between --------------------------------


def _micros(values: pa.Array | pa.ChunkedArray) -> list[int | None]:
    out: list[int | None] = values.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
    return out


def age_at_least(
    reference: pa.Array | pa.ChunkedArray, moment: pa.Array | pa.ChunkedArray, seconds: float
) -> pa.Array:
    """Per row, whether `moment` lies `seconds` or more before `reference` (null where
    either is null)."""
    limit = int(seconds * 1_000_000)
    return pa.array(
        [
            None if r is None or m is None else r - m >= limit
            for r, m in zip(_micros(reference), _micros(moment), strict=True)
        ],
        pa.bool_(),
    )


def hours_between(
    reference: pa.Array | pa.ChunkedArray, moment: pa.Array | pa.ChunkedArray
) -> pa.Array:
    """Per row, hours from `moment` to `reference` to one decimal, as Spark's `round`
    rounds a double (half up, from the double's shortest decimal text)."""
    out: list[float | None] = []
    for r, m in zip(_micros(reference), _micros(moment), strict=True):
        if r is None or m is None:
            out.append(None)
            continue
        hours = (r - m) / 3_600_000_000
        out.append(float(Decimal(repr(hours)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)))
    return pa.array(out, pa.float64())


# --- the registry of twins -------------------------------------------------------------------

#: Spark rule name -> (the rule, its Arrow twin).
TWINS: Final[dict[str, tuple[FindingRule[Any], Callable[..., FoundRows]]]] = {}


def twin_of(
    rule: FindingRule[Any],
) -> Callable[[Callable[..., FoundRows]], Callable[..., FoundRows]]:
    """Registers the decorated function as `rule`'s Arrow twin: it takes the rule's
    parameters (checked here, at import) and returns what it found."""

    def register(find: Callable[..., FoundRows]) -> Callable[..., FoundRows]:
        parameters = tuple(inspect.signature(find).parameters)
        if parameters != rule.inputs:
            raise TypeError(
                f"Arrow twin {find.__name__} takes {parameters}; its rule {rule.name} takes"
                f" {rule.inputs}"
            )
        if rule.name in TWINS:
            raise TypeError(f"finding rule {rule.name} has two Arrow twins")
        TWINS[rule.name] = (rule, find)
        return find

    return register


def run_twin(rule: FindingRule[Any], inputs: Mapping[str, Any]) -> pa.Table | None:
    """`rule`'s rows found by its Arrow twin from `inputs` (a value, or None, for each
    input it reads); None when an input it needs is None (as `FindingRule.run_with`)."""
    _, find = TWINS[rule.name]
    values = {name: inputs.get(name) for name in rule.inputs}
    if any(values[name] is None for name in rule.required_inputs):
        return None
    return rule_rows(rule, find(**values))


def concat(tables: Sequence[pa.Table]) -> pa.Table:
    """Finding rows of several rules in one table."""
    return (
        pa.concat_tables([t.cast(FINDINGS_ARROW_SCHEMA) for t in tables])
        if tables
        else (empty_findings())
    )
