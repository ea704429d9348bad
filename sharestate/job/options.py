"""The replay job's command-line options, parsed into a checked `JobConfig`.

Shared by the `sharestate replay` command (`cli`) and the spark-submit script
(jobs/replay_share_state.py). Defaults live in `JobConfig`, so a `--config` file can set
them; every check is `JobConfig`'s.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from sharestate.job.config import (
    INPUT_FORMATS,
    MODES,
    OUTPUT_FORMATS,
    JobConfig,
    build_config,
    read_config_file,
)


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
        metavar="auto|4.0|4.1|4.2|4.3|4.4",
        help="Kafka release whose record layout to use (default: auto-detect per record); "
        "a release whose layouts the job does not know is refused",
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
    parser.add_argument(
        "--kafka-timeout",
        metavar="SPAN",
        help="how long the broker of a kafka:// input has to answer before the run stops, "
        "e.g. 30s, 2m (default 60s)",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        help="default: full. incremental reads only what arrived since the last complete "
        "run's checkpoint and needs --output-format delta (it updates the tables in place)",
    )
    parser.add_argument(
        "--as-of",
        metavar="OFFSET|TIMESTAMP",
        help="replay only records at or before this state-topic offset or "
        "ISO-8601 timestamp (UTC unless it names a zone)",
    )
    parser.add_argument(
        "--remote",
        metavar="URL",
        help="run on this Spark Connect server (sc://HOST:PORT, as SparkSession.builder.remote "
        "takes it) instead of a session of this process; default: the SPARK_REMOTE variable, "
        "if set",
    )
    parser.add_argument(
        "--show",
        type=int,
        default=0,
        metavar="N",
        help="print N rows of share_partition_state at the end (default 0: none)",
    )


def config_from_args(args: argparse.Namespace) -> JobConfig:
    """The run's config: the --config file's values, the options given on top, checked for
    a run (so a bad option stops it before Spark starts)."""
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
        "kafka_timeout": args.kafka_timeout,
    }
    config = build_config(file_values, overrides)
    config.validate_for_run()
    return config


def _script_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replay_share_state.py",
        description="Decode exported Kafka share-group state and write the audit tables.",
    )
    add_replay_arguments(parser)
    return parser


def parse_args(argv: Sequence[str] | None = None) -> JobConfig:
    """The spark-submit script's options (the same as `sharestate replay`'s)."""
    return config_from_args(_script_parser().parse_args(argv))


def parse_args_and_remote(argv: Sequence[str] | None = None) -> tuple[JobConfig, str | None]:
    """`parse_args`, and the Spark Connect server `--remote` names (None: not given)."""
    args = _script_parser().parse_args(argv)
    return config_from_args(args), args.remote
