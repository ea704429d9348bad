"""Two designs' incremental runs in one session of the machine (not in `make bench`).

A goal stated against a number measured on another day ("within 1.2x of the 5.9 s before
the streams") compares two machine states as much as two designs: these machines drift by
20-30% between days. This benchmark runs an older commit (`--base`, checked out in a git
worktree under bench-data/designs/) and the work tree side by side, each in a Spark session
of its own (a long-lived child process with its own tree's `bench_session`), their runs
taking turns, on bench_incremental's layout (the 10M history less its newest 100,000
records, and the increments cut from those):

* per export format (`--export-format`, both by default), a full run over the history for
  each design, on an export of its own (hard links of the same files; a Delta export is a
  copy of the history's table);
* Parquet only: the 10,000-record increment REPEATS times, each from the output before the
  increments (the export rewound: bench_incremental's turns, the 5.9 s's protocol);
* successive increments: the 10,000-record increment (a warm-up), then three more of 10,000
  records each, every run going on from the one before (the export only grows).

The medians of each protocol, and the work tree's over the base's, measured in the same
run, go to bench/results/ (`designs`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_incremental import (  # noqa: E402
    REPEATS,
    _layout,
    _next_increments,
)
from bench_replay import DATA  # noqa: E402
from bench_results import write_result  # noqa: E402

DESIGNS = DATA / "designs"

#: The child: a Spark session of its tree's benchmarks, running the job on request. It
#: reads one JSON request a line and answers with a line that starts with ANSWER (the job
#: prints its summary on the same stdout).
ANSWER = "@@designs "
CHILD = r"""
import json, logging, sys, time
sys.path.insert(0, "bench")
from bench_replay import bench_session
from bench_results import machine, spark_settings
from sharestate.job import JobConfig, main as run_job

spark = bench_session("sharestate-bench-designs")
lines = []
class Lines(logging.Handler):
    def emit(self, record):
        lines.append((round(time.perf_counter() - started, 2), record.getMessage()))
logger = logging.getLogger("sharestate")
logger.setLevel(logging.INFO)
logger.addHandler(Lines())
answer = lambda value: print(ANSWER + json.dumps(value), flush=True)
answer({"machine": machine(spark), "spark": spark_settings(spark)})
for request in sys.stdin:
    request = json.loads(request)
    lines.clear()
    started = time.perf_counter()
    summary = run_job(spark, JobConfig(share_state=request["export"],
                                       output=request["output"], mode=request["mode"]))
    seconds = round(time.perf_counter() - started, 2)
    read = ((summary.get("inputs") or {}).get("share_state") or {}).get("rows_read")
    answer({"seconds": seconds, "rows_read": read, "mode": summary.get("mode"),
            "stages": lines})
spark.stop()
"""


class Design:
    """One design's child process: its tree, its session, its exports and outputs."""

    def __init__(self, label: str, tree: Path) -> None:
        self.label, self.tree = label, tree
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.process = subprocess.Popen(
            [sys.executable, "-u", "-c", f"ANSWER = {ANSWER!r}\n{CHILD}"],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.session = self._answer()

    def run(self, export: Path, output: Path, mode: str) -> dict[str, Any]:
        request = {"export": str(export), "output": str(output), "mode": mode}
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def _answer(self) -> dict[str, Any]:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        for line in stdout:
            if line.startswith(ANSWER):
                answer: dict[str, Any] = json.loads(line[len(ANSWER) :])
                return answer
        raise RuntimeError(f"the {self.label} design's process ended: {self.process.wait()}")

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=120)


def _worktree(commit: str) -> Path:
    """The tree of `commit` (a git worktree, made once), with the work tree's jars: the
    JVM fast paths' sources must be the same at both (checked)."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short=7", commit],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    changed = subprocess.run(
        ["git", "diff", "--stat", sha, "--", "jvm/src/main", "sharestate/jvm/contract.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if changed:
        raise SystemExit(f"the JVM fast paths changed since {sha}: build its jar first\n{changed}")
    tree = DESIGNS / sha
    if not tree.is_dir():
        DESIGNS.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=True)
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), sha], cwd=ROOT, check=True)
    if not (tree / ".jars").exists():
        (tree / ".jars").symlink_to(ROOT / ".jars")
    return tree


class Export:
    """A design's own export of the layout's history, in one format, as increments arrive."""

    def __init__(self, layout: Path, place: Path, export_format: str) -> None:
        self.layout, self.place, self.format = layout, place, export_format
        shutil.rmtree(place, ignore_errors=True)
        place.mkdir(parents=True)
        if export_format == "parquet":
            for path in (layout / "export").glob("*.parquet"):
                if not path.name.startswith("inc-"):
                    os.link(path, place / path.name)
        else:
            # The history's Delta table (one commit, made once) with its files linked.
            table = _delta_history(layout)
            (place / "_delta_log").mkdir()
            shutil.copy(table / "_delta_log" / FIRST_COMMIT, place / "_delta_log")
            for path in table.glob("*.parquet"):
                os.link(path, place / path.name)
        self.arrived: list[str] = []

    def arrive(self, *names: str) -> None:
        """The export as it is once `names` have arrived, appended after what arrived
        already when that is how they start, else after rewinding to the history."""
        if list(names[: len(self.arrived)]) != self.arrived:
            self._rewind()
        for name in names[len(self.arrived) :]:
            source = self.layout / f"{name}.parquet"
            if self.format == "parquet":
                os.link(source, self.place / source.name)
            else:
                write_deltalake(str(self.place), pq.read_table(source), mode="append")
        self.arrived = list(names)

    def _rewind(self) -> None:
        if self.format == "parquet":
            for path in self.place.glob("inc-*.parquet"):
                path.unlink()
        else:
            for entry in (self.place / "_delta_log").iterdir():
                if entry.name != FIRST_COMMIT and not entry.is_dir():
                    entry.unlink()
            DeltaTable(str(self.place))  # the rewound table opens
        self.arrived = []


FIRST_COMMIT = "00000000000000000000.json"


def _delta_history(layout: Path) -> Path:
    """The layout's history as a Delta table of one commit (made once, by delta-rs as
    bench_incremental's Delta export)."""
    table = DESIGNS / f"history-delta-{layout.name}"
    if not (table / "_delta_log" / FIRST_COMMIT).exists():
        shutil.rmtree(table, ignore_errors=True)
        history = sorted(
            str(p) for p in (layout / "export").glob("*.parquet") if not p.name.startswith("inc-")
        )
        write_deltalake(str(table), ds.dataset(history).to_table())
    return table


def _median(turns: list[float]) -> float:
    return round(statistics.median(turns), 2)


def _measure(
    designs: dict[str, Design], layout: Path, export_format: str, repeats: int
) -> dict[str, Any]:
    """Full runs, then (Parquet) the rewound turns and the successive increments, the
    designs taking turns run by run."""
    work = DESIGNS / "runs"
    exports = {
        label: Export(layout, work / f"export-{label}-{export_format}", export_format)
        for label in designs
    }
    out = {label: work / f"out-{label}-{export_format}" for label in designs}
    before = {label: work / f"before-{label}-{export_format}" for label in designs}
    result: dict[str, Any] = {label: {} for label in designs}
    for label, design in designs.items():
        shutil.rmtree(out[label], ignore_errors=True)
        shutil.rmtree(before[label], ignore_errors=True)
        full = design.run(exports[label].place, out[label], "full")
        result[label]["full_history_seconds"] = full["seconds"]
        shutil.copytree(out[label], before[label])

    def increment(label: str, *names: str, rewound: bool) -> dict[str, Any]:
        if rewound:
            shutil.rmtree(out[label])
            shutil.copytree(before[label], out[label])
        exports[label].arrive(*names)
        run = designs[label].run(exports[label].place, out[label], "incremental")
        if run["mode"] != "incremental" or not run["rows_read"]:
            raise RuntimeError(f"{label}: the increment {names} measured nothing: {run}")
        return run

    if export_format == "parquet":
        for label in designs:
            result[label]["rewound"] = []
        for _ in range(repeats):
            for label in designs:
                run = increment(label, "inc-small", rewound=True)
                result[label]["rewound"].append(run["seconds"])
        for label in designs:
            result[label]["rewound_median"] = _median(result[label]["rewound"])
    names = ["inc-small", *_next_increments(layout)]
    for label in designs:
        result[label].update(successive=[], rows_read=[])
    for k in range(len(names)):
        for label in designs:
            run = increment(label, *names[: k + 1], rewound=k == 0)
            if k == 0:
                result[label]["successive_warm_up"] = run["seconds"]
                continue
            result[label]["successive"].append(run["seconds"])
            result[label]["rows_read"].append(run["rows_read"])
            result[label]["stages_last"] = run["stages"]
    for label in designs:
        result[label]["successive_median"] = _median(result[label]["successive"])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="780cf5b", help="the older design's commit")
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--share-partitions", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=932)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--export-format", choices=("parquet", "delta", "both"), default="both")
    args = parser.parse_args()
    layout, meta = _layout(args.records, args.share_partitions, args.seed)
    started = time.perf_counter()
    designs = {"base": Design("base", _worktree(args.base)), "current": Design("current", ROOT)}
    formats = ["parquet", "delta"] if args.export_format == "both" else [args.export_format]
    try:
        measured = {fmt: _measure(designs, layout, fmt, args.repeats) for fmt in formats}
    finally:
        for design in designs.values():
            design.stop()
    ratios: dict[str, float] = {}
    for fmt, result in measured.items():
        for protocol in ("rewound_median", "successive_median"):
            if protocol in result["current"]:
                ratios[f"{fmt}_{protocol}_current_over_base"] = round(
                    result["current"][protocol] / result["base"][protocol], 3
                )
    results = {
        "meta": meta,
        "base": args.base,
        "measured": measured,
        "ratios": ratios,
        "goals": {"current_over_base": 1.2},
        "met": {name: value <= 1.2 for name, value in ratios.items()},
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    settings = {
        "command": "bench/bench_designs.py",
        **vars(args),
        "spark": {label: d.session["spark"] for label, d in designs.items()},
    }
    results = json.loads(json.dumps(results).replace(f"{ROOT}/", ""))
    write_result("designs", settings, results, designs["current"].session["machine"])
    print(
        json.dumps(
            {
                "ratios": ratios,
                "medians": {
                    fmt: {
                        label: {k: v for k, v in r.items() if k.endswith("median")}
                        for label, r in m.items()
                    }
                    for fmt, m in measured.items()
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
