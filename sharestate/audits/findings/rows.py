"""What the finding rules share to build their rows' values: message text with values as
Spark's `cast(... as string)` prints them in a UTC session (the text the `findings` table
has always had, so that rows found by different runs read alike), ages and hours between
times, and the rows of several rules in one table (`concat`).

Found rows are few (a row per problem), so messages are built value by value in Python.
Pure pyarrow: no Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from sharestate.audits.findings.registry import FINDINGS_SCHEMA

#: A part of a message: literal text, or an array with a value per row.
Part: TypeAlias = str | pa.Array | pa.ChunkedArray


# --- message text, as Spark casts values to strings -------------------------------------------


def text_of(value: Any) -> str:
    """One value as Spark's `cast(... as string)` prints it in a UTC session, `?` for null."""
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
    """Per row, the literal parts and the row's values (null as `?`) joined."""
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
    """Per row, `when` where `condition` is true, else `otherwise` (null counts as
    false)."""
    flags = pc.fill_null(condition, False).to_pylist()
    return pa.array([when if flag else otherwise for flag in flags], pa.string())


# --- time ------------------------------------------------------------------------------------


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
    """Per row, hours from `moment` to `reference` to one decimal, rounded as Spark's
    `round` rounds a double (half up, from the double's shortest decimal text)."""
    out: list[float | None] = []
    for r, m in zip(_micros(reference), _micros(moment), strict=True):
        if r is None or m is None:
            out.append(None)
            continue
        hours = (r - m) / 3_600_000_000
        out.append(float(Decimal(repr(hours)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)))
    return pa.array(out, pa.float64())


def empty_findings() -> pa.Table:
    """A `findings` table without rows."""
    return FINDINGS_SCHEMA.empty_table()


def concat(tables: Sequence[pa.Table]) -> pa.Table:
    """Finding rows of several rules in one table."""
    if not tables:
        return empty_findings()
    return pa.concat_tables([t.select(FINDINGS_SCHEMA.names).cast(FINDINGS_SCHEMA) for t in tables])
