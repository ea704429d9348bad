"""The simulator behind `make run`, the tests and the benchmark."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from sharestate.kafka.records import decode_share_state
from sharestate.replay.state import fold
from sharestate.sample import encode
from sharestate.sample.simulate import (
    SimulationSpec,
    deleted_groups,
    records_per_share_partition,
    share_partitions,
    simulate,
    simulate_share_partition,
    snapshot_value,
    update_value,
    write_export,
)


def test_record_bytes_equal_the_schema_driven_encoder() -> None:
    rng = random.Random(1)
    for _ in range(300):
        batches = [
            (rng.randrange(10**9), rng.randrange(10**9), rng.choice([0, 2, 4]), rng.randrange(9))
            for _ in range(rng.randrange(4))
        ]
        dcc = rng.choice([None, -1, 0, rng.randrange(10**6)])
        layout = "4.1" if dcc is None else "4.2"
        epochs = [rng.randrange(2**31) for _ in range(3)]
        start, created, written = (rng.randrange(-1, 2**62) for _ in range(3))
        assert update_value(epochs[0], epochs[1], start, batches, dcc) == encode.share_update_value(
            snapshot_epoch=epochs[0],
            leader_epoch=epochs[1],
            start_offset=start,
            batches=batches,
            delivery_complete_count=dcc,
            layout=layout,
        )
        assert snapshot_value(
            *epochs, start, created, written, batches, dcc
        ) == encode.share_snapshot_value(
            snapshot_epoch=epochs[0],
            state_epoch=epochs[1],
            leader_epoch=epochs[2],
            start_offset=start,
            create_timestamp=created,
            write_timestamp=written,
            batches=batches,
            delivery_complete_count=dcc,
            layout=layout,
        )


def test_replaying_what_the_simulator_wrote_gives_what_its_coordinator_holds() -> None:
    spec = SimulationSpec(records=6_000, share_partitions=40, records_per_snapshot=25, workers=1)
    sizes = records_per_share_partition(spec)
    ids = share_partitions(spec)
    gone = deleted_groups(spec, sorted({sp.group_id for sp in ids}))
    assert gone
    kinds: Counter[str] = Counter()
    for index, sp in enumerate(ids):
        coordinator = simulate_share_partition(spec, index, sizes[index], sp.group_id in gone)
        rows = []
        for _, record_type, value in coordinator.out:  # record types 0 snapshot, 1 update
            key = encode.share_state_key(record_type, sp.group_id, sp.topic_id, sp.partition)
            row = decode_share_state(key, value)  # raises on anything it cannot decode
            kinds[row["record_type"]] += 1
            rows.append(row)
        state = fold(rows)
        if sp.group_id in gone:
            assert state is None
            continue
        assert state is not None
        assert state.start_offset == coordinator.start
        assert list(state.batches) == coordinator.batches
        assert (state.leader_epoch, state.snapshot_epoch) == (
            coordinator.leader_epoch,
            coordinator.snapshot_epoch,
        )
    assert kinds["update"] > kinds["snapshot"] > 40 and kinds["tombstone"] > 0


def test_export_is_deterministic_skewed_and_in_log_order() -> None:
    spec = SimulationSpec(records=20_000, share_partitions=100, workers=1)
    table = simulate(spec)
    assert table.equals(simulate(SimulationSpec(records=20_000, share_partitions=100, workers=2)))
    assert abs(table.num_rows - 20_000) < 2_000
    sizes = sorted(records_per_share_partition(spec))
    assert sizes[-1] > 20 * sizes[len(sizes) // 2]  # a few hot share-partitions
    rows = table.select(["partition", "offset", "timestamp"]).to_pylist()
    for before, after in itertools.pairwise(rows):
        if before["partition"] == after["partition"]:
            assert after["offset"] == before["offset"] + 1
            assert after["timestamp"] >= before["timestamp"]
        else:
            assert after["partition"] > before["partition"] and after["offset"] == 0
    assert pc.count_distinct(table.column("partition")).as_py() > 30


def test_export_files_have_a_page_index_as_parquet_mr_writes_them(tmp_path: Path) -> None:
    # An incremental run's filter on (partition, offset) skips pages through the page index.
    table = simulate(SimulationSpec(records=50_000, share_partitions=100, workers=1))
    write_export(table, tmp_path, files=2)
    files = sorted(tmp_path.glob("*.parquet"))
    assert len(files) == 2
    assert sum(pq.ParquetFile(f).metadata.num_rows for f in files) == table.num_rows
    for f in files:
        metadata = pq.ParquetFile(f).metadata
        for group in range(metadata.num_row_groups):
            for column in range(metadata.num_columns):
                chunk = metadata.row_group(group).column(column)
                assert chunk.has_column_index and chunk.has_offset_index, chunk.path_in_schema
