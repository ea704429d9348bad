"""What a pile of small files costs a delta-rs MERGE, and what compaction gives back (the
reason an incremental run compacts, `TableStore.compact`; docs/incremental.md).

A table like a large `archived_messages` (300,000 rows, partitioned by `settled`) written as
1, 50 and 300 files; into each, three times, the insert-only MERGE an increment without
deletions makes (4,000 new ranges, no stored row matched). Then the 300-file table is
compacted as a run compacts it, and the MERGE timed again. Seconds on stdout (not part of
`make bench`: a few seconds, run by hand).

    .venv/bin/python bench/bench_merge_files.py
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sharestate.io.store import COMPACT_TARGET_BYTES

ROWS, NEW = 300_000, 4_000
KEY = ("group_id", "topic_id", "partition", "first_offset")


def _ranges(rng: np.random.Generator, rows: int, settled: bool) -> pa.Table:
    keys = rng.integers(0, 20_000, rows)
    return pa.table(
        {
            "group_id": [f"group-{k % 50}" for k in keys],
            "topic_id": [f"topic-{k % 7:022d}" for k in keys],
            "partition": pa.array(keys % 64, pa.int32()),
            "first_offset": pa.array(rng.integers(0, 10**9, rows)),
            "last_offset": pa.array(rng.integers(0, 10**9, rows)),
            "offsets": pa.array(rng.integers(0, 100, rows)),
            "settled": pa.array([settled] * rows),
        }
    )


def _merge_seconds(path: Path, new: pa.Table) -> float:
    source = new.append_column("_op", pa.array(["insert"] * new.num_rows))
    on = " AND ".join(f"t.{c} = s.{c}" for c in KEY)
    started = time.perf_counter()
    (
        DeltaTable(str(path))
        .merge(source, f"{on} AND s._op = 'delete'", source_alias="s", target_alias="t")
        .when_matched_delete()
        .when_not_matched_insert_all(predicate="s._op = 'insert'", except_cols=["_op"])
        .execute()
    )
    return round(time.perf_counter() - started, 3)


def main() -> None:
    rng = np.random.default_rng(932)
    stored, new = _ranges(rng, ROWS, True), _ranges(rng, NEW, False)
    result: dict[str, object] = {}
    folder = Path(tempfile.mkdtemp(prefix="merge-files-"))
    try:
        for files in (1, 50, 300):
            path = folder / f"files-{files}"
            for chunk in np.array_split(np.arange(ROWS), files):
                write_deltalake(
                    str(path), stored.take(chunk), mode="append", partition_by=["settled"]
                )
            result[f"merge_seconds_{files}_files"] = [_merge_seconds(path, new) for _ in range(3)]
        path = folder / "files-300"
        started = time.perf_counter()
        DeltaTable(str(path)).optimize.compact(target_size=COMPACT_TARGET_BYTES)
        result["compact_seconds_300_files"] = round(time.perf_counter() - started, 3)
        result["files_after_compaction"] = len(DeltaTable(str(path)).file_uris())
        result["merge_seconds_after_compaction"] = [_merge_seconds(path, new) for _ in range(3)]
    finally:
        shutil.rmtree(folder)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
