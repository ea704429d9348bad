"""Decoded `__consumer_offsets` group records built by hand as an Arrow table, as the decode
step gives them, for the pure tests of the share groups."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

import pyarrow as pa

from sharestate.decode.columns import GROUP_RECORD_FIELDS

#: The columns of decoded group records.
GROUP_RECORDS_SCHEMA: Final = pa.schema(
    [
        pa.field("source_partition", pa.int32()),
        pa.field("source_offset", pa.int64()),
        pa.field("source_timestamp", pa.timestamp("us", tz="UTC")),
        *GROUP_RECORD_FIELDS,
    ]
)

#: One record: source_partition, source_offset, source_timestamp, record_type_id, group_id,
#: member_id, tombstone, and its other fields by name.
GroupRecord = tuple[int, int, datetime, int, str | None, str | None, bool | None, Mapping[str, Any]]


def group_records_table(records: Iterable[GroupRecord]) -> pa.Table:
    """`records` as an Arrow table of decoded group records (a share record: type 9 or
    above)."""
    rows = []
    for partition, offset, at, kind, group, member, tombstone, values in records:
        row: dict[str, Any] = dict.fromkeys(GROUP_RECORDS_SCHEMA.names)
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
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=GROUP_RECORDS_SCHEMA)
