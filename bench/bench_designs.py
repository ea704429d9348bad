"""Two designs side by side in one run of the machine (not in `make bench`).

A goal stated against a number measured on another day ("within 1.2x of the 5.9 s before
the streams") compares two machine states as much as two designs: these machines drift by
20-30% between days. This benchmark runs an older commit (`--base`, checked out in a git
worktree under bench-data/designs/) and the work tree in the same run, their runs taking
turns, each design with its own tree's code: a long-lived child process with its own tree's
`bench_session` where the protocol runs in one session, or fresh `python -m sharestate
replay` processes in the design's tree where the protocol asks for fresh processes.

Each design runs with its own JVM jar: the base's built by the base's own
`scripts/build_jvm.sh` into bench-data/designs/<commit>/.jars (beside links to the work
tree's Delta and Kafka jars; its class archive written by its own
`scripts/build_class_archive.py` where it has one), the work tree's from its .jars. A
design with no `jvm/` folder or no build script runs without a jar, and the result says so
(`designs.<label>.jvm_jar`; a session's own word where the design runs in one).

The protocols (`--only NAME` runs one; each has options for its sizes):

* `job10m`: bench_job's whole job, a full run over its export (`--records`, default
  10,000,000 over `--share-partitions` 20,000), `--job-turns` turns (default 1, as
  bench_job), for each design with its jar and for the work tree also without it
  (`current-no-jar`: a jars folder without `sharestate-jvm.jar`): new/base and jar/no-jar.
* `increment10m`: bench_incremental's layout (the history less its newest 100,000
  records): per export format (`--export-format`, both by default, each design on an export
  of its own: hard links of the same files, a Delta export a copy of the history's table),
  a full run over the history; Parquet only, the 10,000-record increment `--repeats` times,
  each from the output before the increments (the export rewound: the 5.9 s's protocol);
  then successive increments: the 10,000-record increment (a warm-up) and three more of
  10,000 records, every run going on from the one before.
* `shapes500k`: bench_shapes' small export (`--small-records` 500,000 over
  `--small-share-partitions` 1,000): fresh processes, a full run and then a fresh
  `--mode incremental` process for the newest `--small-new` 10,000 records, `--repeats`
  turns (bench_shapes' three), the designs taking turns.
* `shapes2m`: bench_shapes' big export (`--big-records` 2,000,000 over
  `--big-share-partitions` 4,000): fresh processes, a full run over its older half, then
  the other half (1,000,000 records) in one incremental run.
* `connect1m`: bench_sessions' (c): fresh `sharestate replay --remote` processes on a local
  Spark Connect server per design (started in the design's tree, so that its Python workers
  run its code; Spark's default settings, the Delta and Kafka jars, no JVM jar; the start
  not timed), a full run over `--connect-records` (1,000,000 over
  `--connect-share-partitions` 2,000) and then 10,000 new records.

After each protocol every output it left is compared with the base's, table by table, row
for row (every Delta table but `run_summary` and `_checkpoint`; the logic of
tests/support/tables.py). A difference fails the benchmark: the result is written with
`tables_equal` false for that protocol, the differing table and a few rows printed, and
the exit status is 1.

The medians per protocol and design, each the work tree's over the base's (`ratios`, new /
base) and the jar's (`job10m_full_jar_over_no_jar`), and `tables_equal` per protocol go to
bench/results/ (`designs`; `--results-dir` elsewhere, e.g. for a run on tiny sizes).
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
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_sessions  # noqa: E402
import bench_shapes  # noqa: E402
from bench_incremental import (  # noqa: E402
    REPEATS,
    _layout,
    _next_increments,
)
from bench_replay import DATA, _export  # noqa: E402
from bench_results import machine_of_processes, write_result  # noqa: E402

from sharestate.job.session import read_spark_defaults  # noqa: E402
from tests.support.connect_server import ConnectServer, free_port  # noqa: E402
from tests.support.tables import SHOWN, assert_same_rows, delta_tables  # noqa: E402

DESIGNS = DATA / "designs"
WORK = DESIGNS / "runs"
JVM_JAR = "sharestate-jvm.jar"
CLASS_ARCHIVE = "driver-classes.jsa"
PROTOCOLS = ("job10m", "increment10m", "shapes500k", "shapes2m", "connect1m")

#: The child: a Spark session of its tree's benchmarks, running the job on request. It
#: reads one JSON request a line and answers with a line that starts with ANSWER (the job
#: prints its summary on the same stdout). DESIGNS_JARS names the jars folder its session
#: loads (the tree's `bench_session` names its own .jars: the folder is put in its place).
ANSWER = "@@designs "
CHILD = r"""
import json, logging, os, sys, time
sys.path.insert(0, "bench")
import sharestate.job.session as session_module
local_session = session_module.local_session
def with_jars(**settings):
    return local_session(**{**settings, "jars_dir": os.environ["DESIGNS_JARS"]})
session_module.local_session = with_jars
from bench_replay import bench_session
from bench_results import machine, spark_settings
from sharestate.job import JobConfig, main as run_job

spark = bench_session("sharestate-bench-designs")
try:
    from sharestate.jvm.bridge import available
    jvm_jar = bool(available(spark))
except ImportError:
    jvm_jar = None
lines = []
class Lines(logging.Handler):
    def emit(self, record):
        lines.append((round(time.perf_counter() - started, 2), record.getMessage()))
logger = logging.getLogger("sharestate")
logger.setLevel(logging.INFO)
logger.addHandler(Lines())
answer = lambda value: print(ANSWER + json.dumps(value), flush=True)
answer({"machine": machine(spark), "spark": spark_settings(spark), "jvm_jar": jvm_jar})
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


class Tree:
    """A design's tree and the jars folder its runs load (with or without the JVM jar)."""

    def __init__(self, label: str, path: Path, jars: Path, note: str) -> None:
        self.label, self.path, self.jars, self.note = label, path, jars, note

    @property
    def jvm_jar(self) -> bool:
        return (self.jars / JVM_JAR).is_file()

    def env(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(self.path), "PYSPARK_PYTHON": sys.executable}
        env["SHARESTATE_JARS"] = str(self.jars)
        env.pop("SPARK_REMOTE", None)
        return env

    def describe(self) -> dict[str, Any]:
        return {
            "tree": os.path.relpath(self.path, ROOT),
            "jars": os.path.relpath(self.jars, ROOT),
            "jvm_jar": self.jvm_jar,
            "class_archive": (self.jars / CLASS_ARCHIVE).is_file(),
            "note": self.note,
        }


class Design:
    """One design's child process: its tree's code and session, the job on request."""

    def __init__(self, tree: Tree) -> None:
        self.tree, self.label = tree, tree.label
        env = {**tree.env(), "DESIGNS_JARS": str(tree.jars)}
        self.process = subprocess.Popen(
            [sys.executable, "-u", "-c", f"ANSWER = {ANSWER!r}\n{CHILD}"],
            cwd=tree.path,
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


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.strip()


def _link_jars(folder: Path, source: Path) -> None:
    """Links in `folder` to the jars of `source` but the JVM jar (Delta, Kafka)."""
    folder.mkdir(parents=True, exist_ok=True)
    for jar in sorted(source.glob("*.jar")):
        link = folder / jar.name
        if jar.name != JVM_JAR and not link.exists():
            link.symlink_to(jar.resolve())


def _builds_jar(tree: Path) -> bool:
    return (tree / "jvm").is_dir() and (tree / "scripts" / "build_jvm.sh").is_file()


def _base_tree(commit: str) -> tuple[str, Tree]:
    """The tree of `commit` (a git worktree, made once) and its own jars folder: the
    work tree's Delta and Kafka jars linked, its JVM jar built by its own script, and its
    class archive written by its own script where it has them (once)."""
    sha = _git("rev-parse", "--short=7", commit)
    tree = DESIGNS / sha
    if not tree.is_dir():
        DESIGNS.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=True)
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), sha], cwd=ROOT, check=True)
    jars = tree / ".jars"
    if jars.is_symlink():  # an older bench_designs linked the work tree's .jars here
        jars.unlink()
    _link_jars(jars, ROOT / ".jars")
    env = {**os.environ, "PYTHONPATH": str(tree), "PYSPARK_PYTHON": sys.executable}
    if not _builds_jar(tree):
        (jars / JVM_JAR).unlink(missing_ok=True)
        return sha, Tree("base", tree, jars, "no jvm/ or scripts/build_jvm.sh: no JVM jar")
    if not (jars / JVM_JAR).is_file():
        print(f"building {sha}'s JVM jar with its scripts/build_jvm.sh", flush=True)
        subprocess.run(
            ["bash", "scripts/build_jvm.sh", sys.executable, str(jars)],
            cwd=tree,
            env=env,
            check=True,
        )
    note = f"JVM jar built by {sha}'s scripts/build_jvm.sh"
    archive_script = tree / "scripts" / "build_class_archive.py"
    if (ROOT / ".jars" / CLASS_ARCHIVE).is_file() and archive_script.is_file():
        if not (jars / CLASS_ARCHIVE).is_file():
            print(f"writing {sha}'s class archive with its build_class_archive.py", flush=True)
            subprocess.run(
                [sys.executable, str(archive_script), str(jars)], cwd=tree, env=env, check=True
            )
        note += ", class archive by its scripts/build_class_archive.py"
    return sha, Tree("base", tree, jars, note)


def _current_trees() -> tuple[Tree, Tree]:
    """The work tree with its .jars (its JVM jar, where it builds one), and without it."""
    without = DESIGNS / "jars-without-jvm-jar"
    shutil.rmtree(without, ignore_errors=True)
    _link_jars(without, ROOT / ".jars")
    no_jar = Tree("current-no-jar", ROOT, without, "the work tree's jars but its JVM jar")
    if _builds_jar(ROOT) and (ROOT / ".jars" / JVM_JAR).is_file():
        return Tree("current", ROOT, ROOT / ".jars", "the work tree's .jars"), no_jar
    current = Tree("current", ROOT, without, "no jvm/ or scripts/build_jvm.sh: no JVM jar")
    return current, no_jar


# -- comparing the outputs ---------------------------------------------------------------

#: Tables of more rows than this are compared in DuckDB (EXCEPT ALL both ways) rather than
#: as Python rows (tests/support/tables.py's way: 80 s for the tables of a 200,000-record
#: run, where DuckDB took 14 s).
PYTHON_ROWS = 100_000


def _same_rows_duckdb(got: Path, want: Path) -> None:
    """assert_same_rows of tests/support/tables.py for large tables: the same columns
    (names, types, order), the same rows each as many times, any order."""
    import duckdb

    got_table = DeltaTable(str(got)).to_pyarrow_table()
    want_table = DeltaTable(str(want)).to_pyarrow_table()
    columns = [(f.name, f.type) for f in got_table.schema]
    assert columns == [(f.name, f.type) for f in want_table.schema], f"{got.name}: columns differ"
    with duckdb.connect() as con:
        con.execute("SET enable_progress_bar = false")
        con.register("got_rows", got_table)
        con.register("want_rows", want_table)
        queries = [
            f"SELECT * FROM {one} EXCEPT ALL SELECT * FROM {other}"
            for one, other in (("got_rows", "want_rows"), ("want_rows", "got_rows"))
        ]
        counts = [int(con.sql(f"SELECT count(*) FROM ({q})").fetchall()[0][0]) for q in queries]
        if any(counts):
            shown = [con.sql(f"{q} LIMIT {SHOWN}").fetchall() for q in queries]
            raise AssertionError(
                f"{got.name}: {counts[0]} row(s) not in {want}, {counts[1]} row(s) missing; "
                f"first not wanted: {shown[0]}; first missing: {shown[1]}"
            )


def _rows(path: Path) -> int:
    return int(DeltaTable(str(path)).to_pyarrow_dataset().count_rows())


def compare(got: Path, want: Path) -> list[str]:
    """The differences of the output `got` from `want`, a line per table (none: equal)."""
    names, got_names = delta_tables(want), delta_tables(got)
    differences = []
    if got_names != names:
        only_got = sorted(set(got_names) - set(names))
        only_want = sorted(set(names) - set(got_names))
        differences.append(f"tables differ: only in {got}: {only_got}; only in {want}: {only_want}")
        names = [name for name in names if name in got_names]
    for name in names:
        try:
            if max(_rows(got / name), _rows(want / name)) > PYTHON_ROWS:
                _same_rows_duckdb(got / name, want / name)
            else:
                assert_same_rows(got / name, want / name)
        except AssertionError as err:
            differences.append(str(err))
    return differences


class Protocol:
    """One protocol's measurements, its outputs to compare and its result."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.measured: dict[str, dict[str, Any]] = {}
        self.medians: dict[str, dict[str, float]] = {}
        self.pairs: list[tuple[str, Path, Path]] = []
        self.started = time.perf_counter()

    def result(self) -> dict[str, Any]:
        differences = []
        for what, got, want in self.pairs:
            found = compare(got, want)
            print(f"{self.name}: {what}: {'equal' if not found else 'DIFFERENT'}", flush=True)
            differences += [f"{what}: {line}" for line in found]
        ratios: dict[str, float] = {}
        for metric, base in self.medians.get("base", {}).items():
            for label in ("current", "current-no-jar"):
                value = self.medians.get(label, {}).get(metric)
                if value is not None and base:
                    key = "current_over_base" if label == "current" else "no_jar_over_base"
                    ratios[f"{metric}_{key}"] = round(value / base, 3)
        return {
            "measured": self.measured,
            "medians": self.medians,
            "ratios": ratios,
            "tables_equal": not differences,
            "tables_compared": [what for what, _, _ in self.pairs],
            "differences": differences,
            "wall_seconds": round(time.perf_counter() - self.started, 1),
        }


def _median(turns: list[float]) -> float:
    return round(statistics.median(turns), 2)


def _fresh_output(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


# -- job10m ------------------------------------------------------------------------------


def job10m(trees: list[Tree], args: argparse.Namespace) -> dict[str, Any]:
    """bench_job's full run, each design in a session of its own, in turns."""
    protocol = Protocol("job10m")
    export, meta = _export(args.records, args.share_partitions, args.seed)
    work = WORK / "job10m"
    designs = {tree.label: Design(tree) for tree in trees}
    try:
        turns: dict[str, list[float]] = {label: [] for label in designs}
        for _ in range(args.job_turns):
            for label, design in designs.items():
                run = design.run(export, _fresh_output(work / f"out-{label}"), "full")
                if run["mode"] != "full":
                    raise RuntimeError(f"{label}: the full run ran as {run['mode']}")
                turns[label].append(run["seconds"])
                protocol.measured[label] = {
                    "full_seconds": turns[label],
                    "jvm_jar": design.session["jvm_jar"],
                    "stages_last": run["stages"],
                }
    finally:
        for design in designs.values():
            design.stop()
    for label in designs:
        protocol.medians[label] = {"full": _median(turns[label])}
        if label != "base":
            protocol.pairs.append((label, work / f"out-{label}", work / "out-base"))
    result = {"meta": meta, **protocol.result()}
    jar, no_jar = (protocol.medians.get(k, {}).get("full") for k in ("current", "current-no-jar"))
    if jar and no_jar:
        result["ratios"]["full_jar_over_no_jar"] = round(jar / no_jar, 3)
    return result


# -- increment10m: bench_incremental's layout, in turns (the protocol of the 5.9 s) ------


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


def _increments(
    designs: dict[str, Design],
    layout: Path,
    export_format: str,
    repeats: int,
    protocol: Protocol,
) -> dict[str, Any]:
    """Full runs, then (Parquet) the rewound turns and the successive increments, the
    designs taking turns run by run."""
    work = WORK / "increment10m"
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
        medians = protocol.medians.setdefault(label, {})
        for key in ("full_history_seconds", "rewound_median", "successive_median"):
            if key in result[label]:
                medians[f"{export_format}_{key.removesuffix('_seconds')}"] = result[label][key]
        if label != "base":
            for outputs, what in ((before, "full over the history"), (out, "after the increments")):
                protocol.pairs.append(
                    (f"{label} {export_format} {what}", outputs[label], outputs["base"])
                )
    return result


def increment10m(trees: list[Tree], args: argparse.Namespace) -> dict[str, Any]:
    protocol = Protocol("increment10m")
    layout, meta = _layout(args.records, args.share_partitions, args.seed)
    formats = ["parquet", "delta"] if args.export_format == "both" else [args.export_format]
    designs = {tree.label: Design(tree) for tree in trees}
    try:
        for fmt in formats:
            protocol.measured[fmt] = _increments(designs, layout, fmt, args.repeats, protocol)
        jvm_jar = {label: design.session["jvm_jar"] for label, design in designs.items()}
    finally:
        for design in designs.values():
            design.stop()
    return {"meta": meta, "jvm_jar": jvm_jar, **protocol.result()}


# -- fresh processes: bench_shapes' and bench_sessions' ---------------------------------


def _replay(
    tree: Tree, state: Path, offsets: Path, output: Path, mode: str, *extra: str
) -> dict[str, Any]:
    """One `sharestate replay` process in `tree`'s code, with its jars."""
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sharestate",
            "replay",
            "--share-state",
            str(state),
            "--consumer-offsets",
            str(offsets),
            "--output",
            str(output),
            "--mode",
            mode,
            *extra,
        ],
        cwd=tree.path,
        env=tree.env(),
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = round(time.perf_counter() - started, 2)
    if done.returncode != 0:
        raise RuntimeError(
            f"{tree.label}: {mode} run failed ({done.returncode}):\n{done.stderr[-4000:]}"
        )
    summary = json.loads((output / "run_summary.json").read_text())
    if summary.get("mode") != mode:
        raise RuntimeError(f"{tree.label}: the {mode} run ran as {summary.get('mode')}")
    lines = map(bench_shapes.LOG_LINE.match, done.stderr.splitlines())
    return {"seconds": seconds, "log": [m.groups() for m in lines if m]}


def _shapes_export(records: int, share_partitions: int, seed: int, newest: int) -> Path:
    folder = bench_shapes._export(records, share_partitions, seed, newest)
    made = json.loads((folder / "meta.json").read_text())["newest"]
    if abs(made - newest) > max(newest // 10, 10):
        raise SystemExit(f"{folder} holds another cut ({made} newest, not {newest}): remove it")
    return folder


def shapes500k(trees: list[Tree], args: argparse.Namespace) -> dict[str, Any]:
    """bench_shapes' small export: a full run and a fresh increment per turn and design."""
    protocol = Protocol("shapes500k")
    folder = _shapes_export(
        args.small_records, args.small_share_partitions, args.shapes_seed, args.small_new
    )
    work = WORK / "shapes500k"
    measured: dict[str, dict[str, list[float]]] = {
        t.label: {"full": [], "fixed": [], "fresh_increment": []} for t in trees
    }
    try:
        for _ in range(args.repeats):
            for tree in trees:
                output = _fresh_output(work / f"out-{tree.label}")
                bench_sessions._arrive(folder, False)
                full = _replay(tree, folder / "s", folder / "o", output, "full")
                inside = bench_shapes._span(
                    full["log"], "reading and decoding", "wrote share_partition_history"
                )
                bench_sessions._arrive(folder, True)
                increment = _replay(tree, folder / "s", folder / "o", output, "incremental")
                bench_sessions._arrive(folder, False)
                measured[tree.label]["full"].append(full["seconds"])
                measured[tree.label]["fixed"].append(round(full["seconds"] - inside, 2))
                measured[tree.label]["fresh_increment"].append(increment["seconds"])
    finally:
        bench_sessions._arrive(folder, False)
    for tree in trees:
        protocol.measured[tree.label] = {**measured[tree.label], "jvm_jar": tree.jvm_jar}
        protocol.medians[tree.label] = {k: _median(v) for k, v in measured[tree.label].items()}
        if tree.label != "base":
            protocol.pairs.append((tree.label, work / f"out-{tree.label}", work / "out-base"))
    return {"meta": json.loads((folder / "meta.json").read_text()), **protocol.result()}


def shapes2m(trees: list[Tree], args: argparse.Namespace) -> dict[str, Any]:
    """bench_shapes' big increment: a full run over the older half, then the other half in
    one incremental run, fresh processes, the designs in turns."""
    protocol = Protocol("shapes2m")
    folder = _shapes_export(
        args.big_records, args.big_share_partitions, args.shapes_seed, args.big_records // 2
    )
    work = WORK / "shapes2m"
    outputs = {tree.label: _fresh_output(work / f"out-{tree.label}") for tree in trees}
    runs: dict[str, dict[str, Any]] = {tree.label: {"jvm_jar": tree.jvm_jar} for tree in trees}
    try:
        bench_sessions._arrive(folder, False)
        for tree in trees:
            half = _replay(tree, folder / "s", folder / "o", outputs[tree.label], "full")
            runs[tree.label]["half_full_seconds"] = half["seconds"]
        bench_sessions._arrive(folder, True)
        for tree in trees:
            run = _replay(tree, folder / "s", folder / "o", outputs[tree.label], "incremental")
            runs[tree.label]["increment_seconds"] = run["seconds"]
    finally:
        bench_sessions._arrive(folder, False)
    for tree in trees:
        protocol.measured[tree.label] = runs[tree.label]
        protocol.medians[tree.label] = {
            "half_full": runs[tree.label]["half_full_seconds"],
            "increment": runs[tree.label]["increment_seconds"],
        }
        if tree.label != "base":
            protocol.pairs.append((tree.label, outputs[tree.label], outputs["base"]))
    return {"meta": json.loads((folder / "meta.json").read_text()), **protocol.result()}


class _Server(ConnectServer):
    """tests/support's Connect server, started in a design's tree: its Python workers
    import that tree's `sharestate` (the job ships no code to the server)."""

    def __init__(self, tree: Tree, driver_memory: str) -> None:
        self.port = free_port()
        self.log = WORK / "connect1m" / f"server-{tree.label}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = tree.env()
        env.pop("SPARK_CONNECT_MODE_ENABLED", None)
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.connect_server",
                    "--port",
                    str(self.port),
                    "--jars-dir",
                    str(ROOT / ".jars"),
                    "--driver-memory",
                    driver_memory,
                ],
                cwd=tree.path,
                env=env,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self._wait_until_serving()


def connect1m(trees: list[Tree], args: argparse.Namespace) -> dict[str, Any]:
    """bench_sessions' (c): a full run and 10,000 new on a Connect server per design."""
    protocol = Protocol("connect1m")
    folder = bench_sessions._layout(args.connect_records, args.connect_share_partitions, 39)
    work = WORK / "connect1m"
    memory = read_spark_defaults(ROOT / "conf" / "spark-local.conf")["spark.driver.memory"]
    servers: dict[str, _Server] = {}
    outputs = {tree.label: _fresh_output(work / f"out-{tree.label}") for tree in trees}
    runs: dict[str, dict[str, Any]] = {tree.label: {"jvm_jar": False} for tree in trees}
    try:
        for tree in trees:
            servers[tree.label] = _Server(tree, memory)
        bench_sessions._arrive(folder, False)
        for mode in ("full", "incremental"):
            if mode == "incremental":
                bench_sessions._arrive(folder, True)
            for tree in trees:
                remote = ("--remote", servers[tree.label].url)
                run = _replay(tree, folder / "s", folder / "o", outputs[tree.label], mode, *remote)
                runs[tree.label][f"{mode}_seconds"] = run["seconds"]
    finally:
        bench_sessions._arrive(folder, False)
        for server in servers.values():
            server.stop()
    for tree in trees:
        protocol.measured[tree.label] = runs[tree.label]
        protocol.medians[tree.label] = {
            "full": runs[tree.label]["full_seconds"],
            "increment": runs[tree.label]["incremental_seconds"],
        }
        if tree.label != "base":
            protocol.pairs.append((tree.label, outputs[tree.label], outputs["base"]))
    return {"meta": json.loads((folder / "meta.json").read_text()), **protocol.result()}


RUNS: dict[str, Callable[[list[Tree], argparse.Namespace], dict[str, Any]]] = {
    "job10m": job10m,
    "increment10m": increment10m,
    "shapes500k": shapes500k,
    "shapes2m": shapes2m,
    "connect1m": connect1m,
}


def _table(protocols: dict[str, dict[str, Any]]) -> str:
    """The medians of every protocol and design, and new / base, as text."""
    rows = [("protocol", "measure", "base", "current", "new/base", "no jar", "tables")]
    for name, result in protocols.items():
        medians = result["medians"]
        for metric in medians.get("base", {}):
            cells = [medians.get(label, {}).get(metric) for label in ("base", "current")]
            ratio = result["ratios"].get(f"{metric}_current_over_base")
            no_jar = medians.get("current-no-jar", {}).get(metric)
            rows.append(
                (
                    name,
                    metric,
                    *(f"{v:.2f} s" if v is not None else "—" for v in cells),
                    f"{ratio:.3f}x" if ratio is not None else "—",
                    f"{no_jar:.2f} s" if no_jar is not None else "—",
                    "equal" if result["tables_equal"] else "DIFFER",
                )
            )
        if "full_jar_over_no_jar" in result["ratios"]:
            jar = result["ratios"]["full_jar_over_no_jar"]
            rows.append((name, "jar / no jar", "", "", f"{jar:.3f}x", "", ""))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="6c27702", help="the older design's commit")
    parser.add_argument(
        "--only", choices=PROTOCOLS, action="append", help="run this protocol only (repeatable)"
    )
    parser.add_argument(
        "--repeats", type=int, default=REPEATS, help="turns where the protocol has them"
    )
    parser.add_argument("--records", type=int, default=10_000_000, help="job10m, increment10m")
    parser.add_argument("--share-partitions", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=932)
    parser.add_argument("--job-turns", type=int, default=1, help="job10m's full runs per design")
    parser.add_argument("--export-format", choices=("parquet", "delta", "both"), default="both")
    parser.add_argument("--small-records", type=int, default=bench_shapes.SMALL[0])
    parser.add_argument("--small-share-partitions", type=int, default=bench_shapes.SMALL[1])
    parser.add_argument("--small-new", type=int, default=bench_shapes.SMALL_NEW)
    parser.add_argument("--big-records", type=int, default=bench_shapes.BIG[0])
    parser.add_argument("--big-share-partitions", type=int, default=bench_shapes.BIG[1])
    parser.add_argument("--shapes-seed", type=int, default=40)
    parser.add_argument("--connect-records", type=int, default=1_000_000)
    parser.add_argument("--connect-share-partitions", type=int, default=2_000)
    parser.add_argument(
        "--results-dir", type=Path, help="write the result there, not bench/results/"
    )
    parser.add_argument(
        "--skip-no-jar",
        action="store_true",
        help="job10m without the work tree's run without the JVM jar (base and current only)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    DATA.mkdir(exist_ok=True)
    sha, base = _base_tree(args.base)
    current, no_jar = _current_trees()
    trees = {"base": base, "current": current, "current-no-jar": no_jar}
    protocols: dict[str, dict[str, Any]] = {}
    failed = None
    for name in args.only or PROTOCOLS:
        print(f"== {name}", flush=True)
        taking_part = [base, current]
        if name == "job10m" and not args.skip_no_jar:
            taking_part.append(no_jar)
        protocols[name] = RUNS[name](taking_part, args)
        print(json.dumps(protocols[name]["medians"]), flush=True)
        if not protocols[name]["tables_equal"]:
            failed = name
            break
    ratios = {
        f"{name}_{key}": value
        for name, result in protocols.items()
        for key, value in result["ratios"].items()
        if key.endswith("current_over_base") or key == "full_jar_over_no_jar"
    }
    results = {
        "base": args.base,
        "base_commit": sha,
        "designs": {label: tree.describe() for label, tree in trees.items()},
        "protocols": protocols,
        "ratios": ratios,
        "tables_equal": {name: result["tables_equal"] for name, result in protocols.items()},
        "goals": {"current_over_base": 1.2},
        "met": {k: v <= 1.2 for k, v in ratios.items() if k.endswith("current_over_base")},
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    settings = {"command": "bench/bench_designs.py", **vars(args)}
    settings["results_dir"] = str(args.results_dir) if args.results_dir else None
    results = json.loads(json.dumps(results).replace(f"{ROOT}/", ""))
    path = write_result("designs", settings, results, machine_of_processes())
    if args.results_dir:
        args.results_dir.mkdir(parents=True, exist_ok=True)
        moved = shutil.move(path, args.results_dir / path.name)
        print(f"moved to {moved}")
    print(_table(protocols))
    if failed:
        for line in protocols[failed]["differences"]:
            print(f"{failed}: {line}", file=sys.stderr)
        raise SystemExit(f"{failed}: the designs' tables differ")


if __name__ == "__main__":
    main()
