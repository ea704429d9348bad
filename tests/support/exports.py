"""Sample exports for tests that run the job more than once: the export as a first run saw
it, and as it grew for the next."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sharestate.job import JobConfig
from sharestate.sample.exports import SampleSpec, generate


@dataclass(frozen=True)
class Export:
    """The two exports' folders (Parquet)."""

    share_state: str
    consumer_offsets: str

    def config(self, output: Path, **options: object) -> JobConfig:
        return JobConfig(
            share_state=self.share_state,
            consumer_offsets=self.consumer_offsets,
            output=str(output),
            **options,  # type: ignore[arg-type]
        )


def _write(folder: Path, table: pa.Table) -> str:
    folder.mkdir(parents=True)
    pq.write_table(table, folder / "part-0.parquet")
    return str(folder)


def growing_export(
    root: Path, spec: SampleSpec, state_boundary: int = 30, offsets_boundary: int = 8
) -> tuple[Export, Export]:
    """(early, whole): the sample export cut at an offset of each partition (the first run's
    view), and the whole of it (the next run's), under `root`."""
    state, offsets = generate(spec)
    early_state = state.filter(pc.less(state.column("offset"), state_boundary))
    early_offsets = offsets.filter(pc.less(offsets.column("offset"), offsets_boundary))
    assert 0 < early_state.num_rows < state.num_rows
    early = Export(
        _write(root / "early" / "share_state", early_state),
        _write(root / "early" / "consumer_offsets", early_offsets),
    )
    whole = Export(
        _write(root / "whole" / "share_state", state),
        _write(root / "whole" / "consumer_offsets", offsets),
    )
    return early, whole
