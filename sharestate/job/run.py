"""The `replay` job: options, then read -> compute -> write, then the run summary.

`main(spark, config)` is the entry point every launcher shares: `spark-submit
jobs/replay_share_state.py`, the `sharestate` console script, `python -m sharestate`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any
from urllib.parse import urlparse

from pyspark.sql import DataFrame, SparkSession

from sharestate.errors import InputError, InvalidConfigError
from sharestate.io import (
    Written,
    delta_version,
    keep_writes,
    read_table,
    undo_writes,
    unreadable_files_named,
    write_table,
)
from sharestate.io.checkpoint import (
    APPENDED_TABLES,
    CARRIED_TABLES,
    CHECKPOINT_TABLE,
    PreviousOutput,
    checkpoint_table,
    new_rows_predicate,
    read_prior_run,
    stats_columns,
)
from sharestate.job.config import (
    INPUT_FORMATS,
    MODES,
    OUTPUT_FORMATS,
    JobConfig,
    build_config,
    read_config_file,
)
from sharestate.job.pipeline import (
    Results,
    WrittenTables,
    audit_replayed,
    replay_exports,
    summarize,
)
from sharestate.replay.fold import SINCE

log = logging.getLogger("sharestate")


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the replay job (defaults live in `JobConfig`, so a config file can set them)."""
    parser.add_argument(
        "--share-state",
        metavar="PATH",
        help="export of __share_group_state: Parquet folder, Delta table or "
        "kafka://HOST:PORT (required here or in --config)",
    )
    parser.add_argument(
        "--consumer-offsets", metavar="PATH", help="export of __consumer_offsets (optional)"
    )
    parser.add_argument("--output", metavar="DIR", help="output folder, one sub-folder per table")
    parser.add_argument("--config", metavar="FILE", help="TOML file of these options")
    parser.add_argument("--input-format", choices=INPUT_FORMATS, help="default: auto")
    parser.add_argument("--output-format", choices=OUTPUT_FORMATS, help="default: delta")
    parser.add_argument(
        "--kafka-version",
        metavar="auto|4.0|4.1|4.2|...",
        help="Kafka release whose record layout to use (default: auto-detect per record)",
    )
    parser.add_argument(
        "--delivery-count-limit",
        type=int,
        metavar="N",
        help="Kafka's group.share.delivery.count.limit: archived at this delivery count = "
        "poison message (default 5)",
    )
    parser.add_argument(
        "--end-offsets",
        metavar="PATH",
        help="Parquet/Delta table of topic_id (or topic), partition, end_offset: adds the "
        "share_partition_lag table",
    )
    parser.add_argument(
        "--stall-span",
        metavar="SPAN",
        help="report share-partitions whose start offset has not moved for this long while "
        "records wait, and partitions initializing this long, e.g. 6h, 90m, 2d (default 24h)",
    )
    parser.add_argument(
        "--state-topic-partitions",
        metavar="N|auto",
        help="partitions of __share_group_state, for the wrong-partition check (default auto: "
        "Kafka's default 50 or the highest exported partition + 1, whichever fits)",
    )
    parser.add_argument("--mode", choices=MODES, help="default: full")
    parser.add_argument(
        "--as-of",
        metavar="OFFSET|TIMESTAMP",
        help="replay only records at or before this state-topic offset or "
        "ISO-8601 timestamp (UTC unless it names a zone)",
    )
    parser.add_argument(
        "--show",
        type=int,
        default=0,
        metavar="N",
        help="print N rows of share_partition_state at the end",
    )


def config_from_args(args: argparse.Namespace) -> JobConfig:
    file_values = read_config_file(args.config) if args.config else {}
    overrides = {
        "share_state": args.share_state,
        "consumer_offsets": args.consumer_offsets,
        "output": args.output,
        "input_format": args.input_format,
        "output_format": args.output_format,
        "kafka_version": args.kafka_version,
        "delivery_count_limit": args.delivery_count_limit,
        "end_offsets": args.end_offsets,
        "mode": args.mode,
        "as_of": args.as_of,
        "stall_span": args.stall_span,
        "state_topic_partitions": args.state_topic_partitions,
    }
    config = build_config(file_values, overrides)
    if config.output is None:
        raise InvalidConfigError("--output is required (on the command line or in --config)")
    if config.mode == "incremental" and config.output_format != "delta":
        raise InvalidConfigError(
            "--mode incremental needs --output-format delta (it updates tables in place)"
        )
    if config.mode == "incremental" and config.as_of is not None:
        raise InvalidConfigError("--as-of replays a past state: run it with --mode full")
    return config


def parse_args(argv: Sequence[str] | None = None) -> JobConfig:
    parser = argparse.ArgumentParser(
        prog="replay_share_state.py",
        description="Decode exported Kafka share-group state and write the audit tables.",
    )
    add_replay_arguments(parser)
    return config_from_args(parser.parse_args(argv))


def format_summary(summary: dict[str, Any]) -> str:
    """The run summary as a few lines a person reads at the end of a run."""
    lines = ["sharestate run summary"]
    for source, info in summary["inputs"].items():
        if "skipped" in info:
            lines.append(f"  {source}: {info['skipped']}")
            continue
        check = "ok" if info["reconciled"] else "MISMATCH"
        lines.append(
            f"  {source} ({info['format']}): {info['rows_read']:,} rows read = "
            f"{info['duplicates_dropped']:,} duplicates + {info['decoded']:,} decoded + "
            f"{info['quarantined']:,} quarantined [{check}]"
        )
    records = summary["share_state_records"]
    by_type = ", ".join(f"{k} {v:,}" for k, v in records["by_record_type"].items()) or "none"
    by_layout = ", ".join(f"{k} {v:,}" for k, v in records["by_layout"].items()) or "none"
    lines.append(f"  share-state records: {by_type}; layouts: {by_layout}")
    lines.append(
        f"  share-partitions: {records['share_partitions']:,}; groups: {records['groups']:,}"
    )
    state = summary["share_partition_state"]
    lines.append(
        f"  replayed share-partitions: {state['share_partitions']:,} ({state['deleted']:,} deleted)"
    )
    if "share_group_records" in summary:
        groups = summary["share_group_records"]
        lines.append(f"  share groups in __consumer_offsets: {groups['share_groups']:,}")
    quarantine = summary["quarantine"]
    kinds = ", ".join(f"{k} {v:,}" for k, v in quarantine["by_reason_kind"].items())
    lines.append(f"  quarantined: {quarantine['rows']:,}" + (f" ({kinds})" if kinds else ""))
    lines.extend(_audit_lines(summary))
    return "\n".join(lines)


def _audit_lines(summary: dict[str, Any]) -> list[str]:
    lines = []
    if "share_groups" in summary:
        groups = summary["share_groups"]
        lines.append(
            f"  share groups: {groups['groups']:,} ({groups['deleted']:,} deleted), "
            f"{groups['members']:,} members"
        )
    if "poison_messages" in summary:
        poison, archived = summary["poison_messages"], summary["archived_messages"]
        lines.append(
            f"  poison ranges: {poison['ranges']:,} ({poison['offsets']:,} offsets); archived "
            f"below the limit: {archived['ranges']:,} ranges ({archived['offsets']:,} offsets)"
        )
    if "pruning_cutoff" in summary:
        pruning = summary["pruning_cutoff"]
        lines.append(
            f"  pruning: {pruning['prunable']:,} of {pruning['partitions']:,} state-topic "
            f"partitions prunable, {pruning['records_before_cutoff']:,} records before the cut-off"
        )
    if "lag" in summary:
        lag = summary["lag"]
        lines.append(
            f"  lag: {lag['total_lag']:,} over {lag['with_lag']:,} of "
            f"{lag['share_partitions']:,} share-partitions"
        )
    if "findings" in summary:
        by_severity = summary["findings"]["by_severity"]
        lines.append("  findings: " + ", ".join(f"{k} {v:,}" for k, v in by_severity.items()))
    return lines


def _write_summary_file(output: str, summary: dict[str, Any]) -> None:
    parsed = urlparse(output)
    if parsed.scheme not in ("", "file"):
        return  # remote outputs get the run_summary table only
    folder = parsed.path if parsed.scheme == "file" else output
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "run_summary.json"), "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2, sort_keys=True)
        handle.write("\n")


def _previous_output(spark: SparkSession, output: str) -> PreviousOutput | None:
    """For --mode incremental: the last complete run's checkpoint and tables, if any."""
    prior = read_prior_run(read_table(spark, f"{output}/{CHECKPOINT_TABLE}", "delta"))
    if prior is None or prior.state_version is None:
        return None
    tables: dict[str, DataFrame] = {}
    for name in (*APPENDED_TABLES, "share_partition_state"):
        version = prior.state_version if name == "share_partition_state" else None
        table = read_table(spark, f"{output}/{name}", "delta", version)
        if table is not None:
            tables[name] = table
    # Carried audit tables only at the versions the checkpointed run wrote: a later run
    # that was killed may have written newer ones.
    for name, version in prior.carried.get("versions", {}).items():
        table = read_table(spark, f"{output}/{name}", "delta", int(version))
        if table is not None:
            tables[name] = table
    if "share_partition_state" not in tables:
        return None
    if SINCE not in tables["share_partition_state"].columns:
        log.info("the state under %s predates %s: replaying everything", output, SINCE)
        return None
    return PreviousOutput(prior, tables)


def _untouched_since_checkpoint(
    spark: SparkSession, previous: PreviousOutput, path: str, name: str
) -> bool:
    """Whether the appended table `name` is as the checkpointed run left it (no later,
    unfinished run wrote to it): then new rows are appended as they are, without the
    `replaceWhere`, which would scan the whole table for rows above the checkpoint."""
    recorded = previous.prior.carried.get("appended_versions", {}).get(name)
    return (
        recorded is not None
        and name in previous.tables
        and delta_version(spark, path) == int(recorded)
    )


def _read_back(
    spark: SparkSession,
    output: str,
    output_format: str,
    previous: PreviousOutput | None,
    name: str,
) -> DataFrame:
    """The table this run wrote to `output/name` (of an appended table, this run's rows)."""
    table = read_table(spark, f"{output}/{name}", output_format)
    if table is None:
        raise InputError(f"{output}/{name}: the table this run wrote cannot be read back")
    if previous is not None and name in APPENDED_TABLES:
        table = table.filter(new_rows_predicate(previous.prior, APPENDED_TABLES[name]))
    return table


def _as_written(
    spark: SparkSession,
    results: Results,
    output: str,
    output_format: str,
    previous: PreviousOutput | None,
) -> Results:
    """`results` with the per-record tables read back from `output` (this run's rows of
    them), for the run summary to count: it then counts what was written, and a few
    columns of the written tables are cheaper to read than the decoded rows, whole, from
    the disk cache (when nothing was cached, at 10M records, four decodes for the summary
    were 50 s of a 325 s run)."""
    written = partial(_read_back, spark, output, output_format, previous)
    return replace(
        results,
        share_state_records=written("share_state_records"),
        quarantine=written("quarantine"),
        share_group_records=(
            written("share_group_records") if results.share_group_records is not None else None
        ),
    )


def _write(
    spark: SparkSession,
    df: DataFrame,
    output: str,
    name: str,
    config: JobConfig,
    previous: PreviousOutput | None,
) -> Written:
    """Write one table (of an appended table, this run's rows) and log what it wrote: the
    tables are computed as they are written, so each write is a stage of the run."""
    log.info("writing %s", name)
    started = time.monotonic()
    where, append = None, False
    if previous is not None and name in APPENDED_TABLES:
        append = _untouched_since_checkpoint(spark, previous, f"{output}/{name}", name)
        if not append:
            where = new_rows_predicate(previous.prior, APPENDED_TABLES[name])
    written = write_table(
        df,
        f"{output}/{name}",
        config.output_format,
        replace_where=where,
        append=append,
        stats_columns=stats_columns(name),
        keep_previous=True,
    )
    rows = f"{written.rows:,} rows" if written.rows is not None else "rows not counted"
    how = " (appended)" if append or where is not None else ""
    log.info("wrote %s: %s%s in %.1f s", name, rows, how, time.monotonic() - started)
    return written


def _put_back(spark: SparkSession, done: dict[str, Written], output_format: str) -> None:
    """After a failure: the tables as the run found them, so that the output is the earlier
    run's throughout, not partly this one's. (A killed run cannot do this; see README.)"""
    if not done:
        return
    log.warning("the run failed: putting back the %d table(s) it had written", len(done))
    try:
        undo_writes(spark, done, output_format)
    except Exception:  # the run's own error is the one to report
        log.exception("could not put back every table written before the failure")


def main(spark: SparkSession, config: JobConfig, show: int = 0) -> dict[str, Any]:
    """Run the job: read and decode the exports, write every table, print the summary.

    The checkpoint is written last: a run killed before it leaves the previous run's
    checkpoint in force, and the next incremental run redoes this one's work. A file of an
    input that Spark cannot read (corrupt, truncated, not Parquet) fails the run with an
    `InputError` naming the file and the option, whichever stage first reads it."""
    with unreadable_files_named(config.read_paths()):
        return _run(spark, config, show)


def _run(spark: SparkSession, config: JobConfig, show: int) -> dict[str, Any]:
    if config.output is None:
        raise InvalidConfigError("--output is required to write tables")
    output = config.output.rstrip("/")
    previous = None
    if config.mode == "incremental":
        previous = _previous_output(spark, output)
        if previous is None:
            log.info("no complete earlier run under %s: replaying everything", output)
    # A full run's audits read the per-record tables as written: a few columns of a written
    # table cost less than folding or decoding again, or than caching the fold's output or
    # the decode. An incremental run's new rows are few and are cached instead: they lie
    # scattered over the written tables (at 10M records, finding the last 1% of the history
    # there took 18 s).
    log.info("reading and decoding %s", config.share_state)
    replayed = replay_exports(
        spark,
        config,
        previous,
        keep_history=previous is not None,
        read_back=previous is None,
    )
    done: dict[str, Written] = {}  # path -> what this run wrote there, put back if it fails

    def write(name: str, df: DataFrame) -> int | None:
        done[f"{output}/{name}"] = _write(spark, df, output, name, config, previous)
        return done[f"{output}/{name}"].version

    try:
        first = replayed.tables()
        versions: dict[str, int | None] = {}  # table -> the Delta commit this run made
        for name, df in first.items():
            versions[name] = write(name, df)
        written = None
        if previous is None:
            written_table = partial(_read_back, spark, output, config.output_format, None)
            written = WrittenTables(
                share_partition_history=written_table("share_partition_history"),
                share_state_records=written_table("share_state_records"),
                quarantine=written_table("quarantine"),
            )
        log.info("auditing the replayed state")
        results = audit_replayed(replayed, config, previous, written)
        for name, df in results.tables().items():
            if name not in first:
                versions[name] = write(name, df)
        log.info("counting the run summary")
        summary = summarize(_as_written(spark, results, output, config.output_format, previous))
        state_version = versions["share_partition_state"]
        read = {source: export.rows for source, export in results.inputs.items()}
        carried = None
        if config.output_format == "delta":
            carried = {
                "versions": {name: versions[name] for name in CARRIED_TABLES},
                "appended_versions": {
                    name: versions[name] for name in APPENDED_TABLES if name in versions
                },
                "delivery_count_limit": config.delivery_count_limit,
            }
        checkpoint = checkpoint_table(
            spark, previous.prior if previous else None, read, state_version, carried
        )
        if config.as_of is None:  # a replay "as of" the past is not a point to go on from
            path = f"{output}/{CHECKPOINT_TABLE}"
            done[path] = write_table(checkpoint, path, config.output_format, keep_previous=True)
    except BaseException:
        _put_back(spark, done, config.output_format)
        raise
    finally:
        replayed.unpersist()  # and what the audits cached (the same list)
    keep_writes(spark, done, config.output_format)
    summary["mode"] = "incremental" if previous is not None else "full"
    summary["run_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    summary_df = spark.createDataFrame(
        [(summary["run_at"], json.dumps(summary, sort_keys=True))],
        "run_at string, summary_json string",
    )
    write_table(summary_df, f"{output}/run_summary", config.output_format)
    _write_summary_file(config.output, summary)
    print(format_summary(summary))
    if show:
        shown = spark.read.format(config.output_format).load(
            f"{config.output.rstrip('/')}/share_partition_state"
        )
        shown.select(
            "group_id",
            "topic_id",
            "partition",
            "deleted",
            "start_offset",
            "effective_start_offset",
            "leader_epoch",
            "state_batches",
        ).orderBy("group_id", "topic_id", "partition").show(show, truncate=80)
    return summary
