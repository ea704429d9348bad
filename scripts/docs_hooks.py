"""mkdocs hooks (`hooks:` in mkdocs.yml): the pages that are generated, so they cannot rot.

- `docs/options.md`: the table of the replay job's options, read from its argparse parser
  (`sharestate.job.options.add_replay_arguments`) with the defaults `JobConfig` gives. The build
  fails when an option has no section on the page, a section names an option the parser does
  not have, or a section's stated default is not the code's.
- `docs/performance.md`: one table per benchmark from `bench/results/*.json`, newest first.
  The build fails on a result file without date, commit, machine, settings or results.

Each page holds a marker (an HTML comment, invisible on GitHub) where the table goes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from markdown.extensions.toc import slugify
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

ROOT: Final = Path(__file__).resolve().parent.parent
RESULTS: Final = ROOT / "bench" / "results"
OPTIONS_MARKER: Final = "<!-- generated: replay options -->"
RESULTS_MARKER: Final = "<!-- generated: benchmark results -->"
#: docs/options.md documents each replay option in a section "### `--name`" under this heading.
OPTIONS_HEADING: Final = "## The replay job's options"
_OPTION_HEADING: Final = re.compile(r"^### `(--[a-z][a-z-]*)`\s*$", re.MULTILINE)
_DEFAULT_LINE: Final = re.compile(r"^Default: (.+)$", re.MULTILINE)
REQUIRED_RESULT_KEYS: Final = ("benchmark", "date", "commit", "machine", "settings", "results")
_MIB: Final = " MiB"


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri == "options.md":
        return _fill(markdown, OPTIONS_MARKER, options_table(markdown), page)
    if page.file.src_uri == "performance.md":
        return _fill(markdown, RESULTS_MARKER, results_tables(load_results(RESULTS)), page)
    return markdown


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    # Rebuild when the sources of the generated pages change (`mkdocs serve`).
    config.watch.extend([str(RESULTS), str(ROOT / "sharestate" / "job")])
    return config


def _fill(markdown: str, marker: str, table: str, page: Page) -> str:
    if marker not in markdown:
        raise PluginError(f"{page.file.src_uri}: the marker {marker} is missing")
    return markdown.replace(marker, table)


# --- options ----------------------------------------------------------------------------


def replay_parser() -> argparse.ArgumentParser:
    from sharestate.job.options import add_replay_arguments

    parser = argparse.ArgumentParser(prog="sharestate replay", add_help=False)
    add_replay_arguments(parser)
    return parser


def replay_options() -> list[argparse.Action]:
    """The replay job's options, in the parser's order."""
    return [action for action in replay_parser()._actions if action.option_strings]


def code_default(action: argparse.Action) -> Any:
    """The default the job applies: `JobConfig`'s field of that name (the parser leaves most
    at None so that a --config file can set them), else the parser's own.
    `dataclasses.MISSING` for a value that has none (required)."""
    from sharestate.job.config import JobConfig

    for field in dataclasses.fields(JobConfig):
        if field.name == action.dest:
            return field.default
    return action.default


def _value_text(action: argparse.Action) -> str:
    if action.choices:
        return "|".join(str(choice) for choice in action.choices)
    return str(action.metavar or "")


def _default_text(default: Any, stated: str) -> str:
    if default is dataclasses.MISSING or default is None:
        return stated.split(" ", 1)[0].rstrip(".;,")
    return f"`{default}`"


def _sections(markdown: str) -> dict[str, str]:
    """Option -> the text of its section (up to the next heading), in the part of the page
    headed OPTIONS_HEADING."""
    start = markdown.find(f"\n{OPTIONS_HEADING}\n")
    if start < 0:
        raise PluginError(f"options.md: no heading {OPTIONS_HEADING!r}")
    part = markdown[start + len(OPTIONS_HEADING) + 2 :]
    part = part.split("\n## ", 1)[0]
    found: dict[str, str] = {}
    matches = list(_OPTION_HEADING.finditer(part))
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        end = following.start() if following else len(part)
        found[match.group(1)] = part[match.end() : end].split("\n#", 1)[0]
    return found


def _check_default(option: str, default: Any, body: str) -> str:
    stated = _DEFAULT_LINE.search(body)
    if stated is None:
        raise PluginError(f"options.md: the section of {option} has no 'Default: ...' line")
    text = stated.group(1).strip()
    if default is dataclasses.MISSING or default is None:
        if not text.startswith(("required", "none")):
            raise PluginError(
                f"options.md: {option} has no default in the code; its section says {text!r}"
                " (expected 'required ...' or 'none ...')"
            )
    elif not text.startswith(f"`{default}`"):
        raise PluginError(
            f"options.md: {option} defaults to {default!r} in the code; its section says {text!r}"
        )
    return text


def options_table(markdown: str) -> str:
    """The options table, after checking the page has one section per option and no more."""
    sections = _sections(markdown)
    actions = replay_options()
    names = [action.option_strings[0] for action in actions]
    missing = [name for name in names if name not in sections]
    if missing:
        raise PluginError(f"options.md: no section for {', '.join(missing)}")
    unknown = sorted(set(sections) - set(names))
    if unknown:
        raise PluginError(f"options.md: sections for options the job lacks: {', '.join(unknown)}")
    rows = [
        "| option | value | default | `--help` says |",
        "|---|---|---|---|",
    ]
    for action, name in zip(actions, names, strict=True):
        default = code_default(action)
        stated = _check_default(name, default, sections[name])
        help_text = (action.help or "").replace("|", "\\|")
        value = _value_text(action)  # a table cell's code span may hold "|" as it is
        rows.append(
            f"| [`{name}`](#{slugify(name, '-')}) | {value and f'`{value}`'} | "
            f"{_default_text(default, stated)} | {help_text} |"
        )
    return "\n".join(rows) + "\n"


# --- benchmark results ------------------------------------------------------------------


def load_results(folder: Path) -> list[dict[str, Any]]:
    """Every result file, checked, with its file name under `_file`."""
    results = []
    for path in sorted(folder.glob("*.json")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise PluginError(f"{path.name}: not JSON ({err})") from err
        absent = [key for key in REQUIRED_RESULT_KEYS if key not in result]
        if absent:
            raise PluginError(f"{path.name}: no {', '.join(absent)}")
        if _table_of(result) not in COLUMNS:
            raise PluginError(f"{path.name}: unknown benchmark {result['benchmark']!r}")
        results.append({**result, "_file": path.name})
    return results


def _get(result: dict[str, Any], *path: str | int) -> Any:
    value: Any = result
    for step in path:
        if isinstance(step, int):
            value = value[step] if isinstance(value, list) and len(value) > step else None
        else:
            value = value.get(step) if isinstance(value, dict) else None
    return value


def _number(value: Any, digits: int = 0, suffix: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}{suffix}"
    return str(value)


def _rate(*path: str | int) -> Callable[[dict[str, Any]], str]:
    return lambda result: _number(_get(result, "results", *path))


def _seconds(*path: str | int) -> Callable[[dict[str, Any]], str]:
    return lambda result: _number(_get(result, "results", *path), 1, " s")


def _first_seconds(*paths: tuple[str | int, ...]) -> Callable[[dict[str, Any]], str]:
    """Seconds at the first of `paths` a result has (results' layouts changed over time)."""

    def cell(result: dict[str, Any]) -> str:
        values = [_get(result, "results", *path) for path in paths]
        return _number(next((v for v in values if v is not None), None), 1, " s")

    return cell


def _ratio(*path: str | int, digits: int = 2, suffix: str = "") -> Callable[[dict[str, Any]], str]:
    return lambda result: _number(_get(result, "results", *path), digits, suffix)


def _replay_size(index: int) -> Callable[[dict[str, Any]], str]:
    def cell(result: dict[str, Any]) -> str:
        records = _get(result, "results", "runs", index, "records")
        rate = _get(result, "results", "runs", index, "decode_replay_records_per_sec")
        if rate is None:
            return "—"
        return f"{_number(rate)} ({_number(records)})"

    return cell


def _growth(result: dict[str, Any]) -> str:
    first = _get(result, "results", "growth", "half_to_n_time_ratio")
    second = _get(result, "results", "growth", "n_to_double_time_ratio")
    if first is None and second is None:
        return "—"
    return f"{_number(first, 2)} / {_number(second, 2)}"


def _decode_rates(result: dict[str, Any]) -> str:
    rates = _get(result, "results", "records_per_second") or {}
    return ", ".join(f"{name} {_number(rate)}" for name, rate in rates.items()) or "—"


def _vs(name: str, digits: int) -> Callable[[dict[str, Any]], str]:
    def cell(result: dict[str, Any]) -> str:
        found = {
            key: value
            for key, value in (_get(result, "results") or {}).items()
            if key.endswith(f"_vs_{name}")
        }
        if len(found) == 1:
            return _number(next(iter(found.values())), digits)
        suffix = f"_vs_{name}"
        labelled = (f"{key.removesuffix(suffix)} {_number(v, digits)}" for key, v in found.items())
        return ", ".join(labelled) or "—"

    return cell


def _stage_list(stages: dict[str, Any]) -> str:
    return "; ".join(f"{name} {_number(value, 1)}" for name, value in stages.items())


def _stages(result: dict[str, Any]) -> str:
    """The stage log's seconds, of the full run and of the incremental one."""
    full = _stage_list(_get(result, "results", "stage_log_seconds") or {})
    incremental = _stage_list(_get(result, "results", "incremental", "stage_log_seconds") or {})
    parts = [full, f"incremental: {incremental}" if incremental else ""]
    return "<br>".join(part for part in parts if part) or "—"


def _incremental_export(result: dict[str, Any]) -> str:
    """The export format of an incremental result; `--successive-only` measures both."""
    export = str(_get(result, "settings", "export_format") or "parquet")
    if _get(result, "settings", "successive_only"):
        return f"{export} (successive only, in turns with the other)"
    return export


def _history_records(result: dict[str, Any]) -> str:
    sizes = sorted((_get(result, "results", "history") or {}), key=int, reverse=True)
    if not sizes and _get(result, "settings", "successive_only"):
        return _number(_get(result, "settings", "records"))
    return _number(int(sizes[0])) if sizes else "—"


def _machine(result: dict[str, Any]) -> str:
    machine = result["machine"]
    text = (
        f"{machine.get('cores', '?')} cores, {_number(machine.get('memory_gib'), 0)} GiB, "
        f"Python {machine.get('python', '?')}, Java {machine.get('java', '?')}, "
        f"Spark {machine.get('spark', '?')}"
    )
    return text if machine.get("recorded_with_run", True) else f"{text} (not recorded)"


def _commit(result: dict[str, Any]) -> str:
    commit = result["commit"]
    if commit is None:
        return "—"
    return f"`{str(commit)[:7]}`" + (" (with changes)" if result.get("dirty") else "")


def _date(result: dict[str, Any]) -> str:
    return str(result["date"])[:16].replace("T", " ")


def _source(result: dict[str, Any]) -> str:
    return f"{result.get('source', '')} (`{result['_file']}`)".strip()


def _table_of(result: dict[str, Any]) -> str:
    """The table of COLUMNS a result goes to: its benchmark's, but a `designs` result of the
    layout before the protocols (increments only) has a table of its own."""
    if result["benchmark"] == "designs" and "protocols" not in result["results"]:
        return "designs-increments"
    return str(result["benchmark"])


def _tables_equal(result: dict[str, Any]) -> str:
    """Whether each protocol's outputs equalled the base's: "yes", or the protocols that
    differed."""
    equal = _get(result, "results", "tables_equal")
    if not isinstance(equal, dict) or not equal:
        return "—"
    differing = [name for name, same in equal.items() if not same]
    return "yes" if not differing else "no: " + ", ".join(differing)


Column = tuple[str, Callable[[dict[str, Any]], str]]
_COMMON_HEAD: Final[list[Column]] = [("date (UTC)", _date), ("commit", _commit)]
_COMMON_TAIL: Final[list[Column]] = [("machine", _machine), ("source", _source)]
COLUMNS: Final[dict[str, tuple[str, list[Column]]]] = {
    "decode": (
        "Decode (`bench/bench_decode.py`): records/s, median of the repeats",
        [
            ("records", _rate("records")),
            ("records/s", _decode_rates),
            ("ours / scan", _vs("scan", 2)),
            ("ours / row UDF", _vs("naive", 1)),
        ],
    ),
    "replay": (
        "Decode + replay (`bench/bench_replay.py`): records/s (records) at N/2, N, 2N",
        [
            ("N/2", _replay_size(0)),
            ("N", _replay_size(1)),
            ("N: seconds", _seconds("runs", 1, "replay_seconds")),
            ("2N", _replay_size(2)),
            ("time growth per doubling", _growth),
            ("driver JVM peak", _ratio("memory", "driver_jvm_peak_rss_mib", digits=0, suffix=_MIB)),
            ("Kafka's rate", _rate("kafka", "records_per_sec")),
            ("ratio to Kafka", _ratio("ratio_to_kafka", digits=3)),
        ],
    ),
    "job": (
        "Whole job (`bench/bench_job.py`, or the job's own stage log)",
        [
            ("records", _rate("records")),
            ("full run", _seconds("job_seconds")),
            ("records/s", _rate("job_records_per_sec")),
            ("incremental: new records", _rate("incremental", "new_records")),
            ("incremental", _seconds("incremental", "seconds")),
            ("speed-up", _ratio("incremental", "speedup", suffix="x")),
            ("stages (s)", _stages),
        ],
    ),
    "incremental": (
        "Incremental runs (`bench/bench_incremental.py`): seconds in one session, and as a"
        " fresh process",
        [
            ("history", _history_records),
            ("export", _incremental_export),
            ("10,000 new", _seconds("seconds", "small_increment")),
            ("100,000 new", _seconds("seconds", "large_increment")),
            ("nothing new", _seconds("seconds", "nothing_new")),
            ("full run", _seconds("seconds", "full_run")),
            ("full / 100,000 new", _ratio("ratios", "full_run_over_large_increment", suffix="x")),
            ("100,000 new, median of turns", _seconds("seconds", "large_increment_median")),
            (
                "full / 100,000 new, median",
                _ratio("ratios", "full_run_over_large_increment_median", suffix="x"),
            ),
            ("10,000 new, history / 4", _seconds("seconds", "small_increment_on_small_history")),
            ("growth", _ratio("ratios", "small_increment_history_growth", suffix="x")),
            ("10,000 new, median of turns", _seconds("seconds", "small_increment_median")),
            (
                "growth, medians",
                _ratio("ratios", "small_increment_history_growth_median", suffix="x"),
            ),
            ("fresh: nothing new", _seconds("seconds", "fresh_nothing_new")),
            ("fresh: 10,000 new", _seconds("seconds", "fresh_small_increment")),
            (
                "10,000 new, successive, median",
                _seconds("seconds", "successive_small_increment_median"),
            ),
            (
                "successive: Delta / Parquet",
                _ratio("ratios", "successive_delta_over_parquet", suffix="x"),
            ),
        ],
    ),
    "sessions": (
        "Sessions (`bench/bench_sessions.py`): seconds of a fresh `sharestate replay` process,"
        " (a) classic with the JVM jar, (b) classic without it, (c) a local Spark Connect"
        " server with Spark's default settings",
        [
            ("history", lambda result: _number(_get(result, "settings", "records", "history"))),
            ("(a) full", _seconds("a", "full_seconds")),
            ("(a) 10,000 new", _seconds("a", "increment_seconds")),
            ("(b) full", _seconds("b", "full_seconds")),
            ("(b) 10,000 new", _seconds("b", "increment_seconds")),
            ("(c) full", _seconds("c", "full_seconds")),
            ("(c) 10,000 new", _seconds("c", "increment_seconds")),
            ("full: c / b", _ratio("ratios", "full_c_over_b", suffix="x")),
            ("10,000 new: c / b", _ratio("ratios", "increment_c_over_b", suffix="x")),
        ],
    ),
    "shapes": (
        "Shapes (`bench/bench_shapes.py`): a big increment and a small export, fresh"
        " `sharestate replay` processes with the JVM jar",
        [
            ("2M: full", _seconds("big", "full", "seconds")),
            ("2M: 1M-record increment", _seconds("big", "increment", "seconds")),
            ("increment / full", _ratio("big", "increment_over_full", suffix="x")),
            ("driver peak: increment / full", _ratio("big", "increment_peak_over_full_peak")),
            ("moved export / full", _ratio("big", "moved_export_over_full", suffix="x")),
            ("500k: full", _first_seconds(("small", "full_seconds"), ("small", "full", "seconds"))),
            ("500k: outside read, decode, replay", _seconds("small", "full_fixed_seconds")),
            (
                "500k: fresh 10,000 new",
                _first_seconds(
                    ("small", "fresh_increment_seconds"), ("small", "fresh_increment", "seconds")
                ),
            ),
        ],
    ),
    "streams": (
        "Streams (`bench/bench_streams.py`): 10,000 new records on a history of the size"
        " shown, one session, the median of three turns; the export local or on HDFS (a"
        " mini-cluster), the output local or on HDFS too (a run may measure some places only)",
        [
            ("history", lambda result: _number(_get(result, "settings", "history_records"))),
            ("local Parquet", _seconds("local-parquet", "increment_seconds")),
            ("local Delta", _seconds("local-delta", "increment_seconds")),
            (
                "HDFS export: Parquet",
                _seconds("hdfs-parquet-local-output", "increment_seconds"),
            ),
            ("HDFS export: Delta", _seconds("hdfs-delta-local-output", "increment_seconds")),
            ("HDFS export / local: Parquet", _ratio("hdfs_export_over_local_parquet", suffix="x")),
            ("HDFS export / local: Delta", _ratio("hdfs_export_over_local_delta", suffix="x")),
            ("HDFS both / local: Parquet", _ratio("hdfs_both_over_local_parquet", suffix="x")),
            ("HDFS both / local: Delta", _ratio("hdfs_both_over_local_delta", suffix="x")),
        ],
    ),
    "designs": (
        "Two designs (`bench/bench_designs.py`): an older commit (base, its own JVM jar) and"
        " the work tree (current) taking turns in one run, per protocol; the medians of the"
        " turns, new / base, and whether every output table was equal to the base's",
        [
            ("base", lambda result: f"`{_get(result, 'results', 'base')}`"),
            ("job10m full: base", _seconds("protocols", "job10m", "medians", "base", "full")),
            ("current", _seconds("protocols", "job10m", "medians", "current", "full")),
            ("new / base", _ratio("ratios", "job10m_full_current_over_base", suffix="x")),
            ("jar / no jar", _ratio("ratios", "job10m_full_jar_over_no_jar", suffix="x")),
            (
                "10,000 new (rewound): base",
                _seconds("protocols", "increment10m", "medians", "base", "parquet_rewound_median"),
            ),
            (
                "current",
                _seconds(
                    "protocols", "increment10m", "medians", "current", "parquet_rewound_median"
                ),
            ),
            (
                "new / base",
                _ratio(
                    "ratios", "increment10m_parquet_rewound_median_current_over_base", suffix="x"
                ),
            ),
            (
                "successive new / base: Parquet",
                _ratio(
                    "ratios",
                    "increment10m_parquet_successive_median_current_over_base",
                    suffix="x",
                ),
            ),
            (
                "Delta",
                _ratio(
                    "ratios", "increment10m_delta_successive_median_current_over_base", suffix="x"
                ),
            ),
            (
                "500k full: new / base",
                _ratio("ratios", "shapes500k_full_current_over_base", suffix="x"),
            ),
            (
                "500k fresh 10,000 new: new / base",
                _ratio("ratios", "shapes500k_fresh_increment_current_over_base", suffix="x"),
            ),
            (
                "2M 1M-record increment: new / base",
                _ratio("ratios", "shapes2m_increment_current_over_base", suffix="x"),
            ),
            (
                "Connect full: new / base",
                _ratio("ratios", "connect1m_full_current_over_base", suffix="x"),
            ),
            (
                "Connect 10,000 new: new / base",
                _ratio("ratios", "connect1m_increment_current_over_base", suffix="x"),
            ),
            ("tables equal", _tables_equal),
        ],
    ),
    "designs-increments": (
        "Two designs, before 2026-12 (`bench/bench_designs.py`, increments only): an older"
        " commit (base) and the work tree (current) taking turns in one session, 10,000 new"
        " records on the 10M history, the medians of the turns",
        [
            ("base", lambda result: f"`{_get(result, 'results', 'base')}`"),
            ("Parquet, rewound: base", _seconds("measured", "parquet", "base", "rewound_median")),
            ("current", _seconds("measured", "parquet", "current", "rewound_median")),
            (
                "current / base",
                _ratio("ratios", "parquet_rewound_median_current_over_base", suffix="x"),
            ),
            (
                "Parquet, successive: base",
                _seconds("measured", "parquet", "base", "successive_median"),
            ),
            ("current", _seconds("measured", "parquet", "current", "successive_median")),
            (
                "current / base",
                _ratio("ratios", "parquet_successive_median_current_over_base", suffix="x"),
            ),
            ("Delta, successive: base", _seconds("measured", "delta", "base", "successive_median")),
            ("current", _seconds("measured", "delta", "current", "successive_median")),
            (
                "current / base",
                _ratio("ratios", "delta_successive_median_current_over_base", suffix="x"),
            ),
        ],
    ),
    "follow": (
        "Following Kafka (`bench/bench_follow.py`): `sharestate follow` on a real broker"
        " while a share-group workload writes; each record's lag from its write in"
        " `__share_group_state` to the commit that holds it",
        [
            ("every", lambda result: str(_get(result, "settings", "every"))),
            ("records/s", lambda result: _number(_get(result, "settings", "rate"))),
            ("records measured", _rate("records_measured")),
            ("lag median", _seconds("lag_seconds", "median")),
            ("lag p95", _seconds("lag_seconds", "p95")),
            ("lag max", _seconds("lag_seconds", "max")),
            ("two intervals", _seconds("two_intervals_seconds")),
            (
                "equal to a full run",
                lambda result: str(_get(result, "results", "goals", "tables_equal_full_run")),
            ),
        ],
    ),
}


def results_tables(results: list[dict[str, Any]]) -> str:
    """A table per benchmark, newest run first."""
    parts = []
    for benchmark, (title, columns) in COLUMNS.items():
        runs = [result for result in results if _table_of(result) == benchmark]
        runs.sort(key=lambda result: (str(result["date"]), result["_file"]), reverse=True)
        every = [*_COMMON_HEAD, *columns, *_COMMON_TAIL]
        parts.append(f"### {title}\n")
        if not runs:
            parts.append("No results yet.\n")
            continue
        parts.append("| " + " | ".join(name for name, _ in every) + " |")
        parts.append("|" + "---|" * len(every))
        for run in runs:
            cells = [cell(run).replace("|", "\\|") for _, cell in every]
            parts.append("| " + " | ".join(cells) + " |")
        parts.append("")
    return "\n".join(parts)
