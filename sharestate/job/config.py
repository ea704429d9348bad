"""Typed job configuration and every check of it.

A `JobConfig` comes from command-line options, a TOML config file (`--config`), or a
notebook building one directly; all three end in the same checks. Each option is checked
when the config is built; what a run that writes tables needs besides (an output, and
options that go together) in `JobConfig.validate_for_run`, which the entry points call
before any Spark work.
"""

from __future__ import annotations

import os
import posixpath
import re
import tomllib
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlparse

from sharestate.errors import InvalidConfigError
from sharestate.kafka.records import parse_kafka_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

INPUT_FORMATS: Final = ("auto", "parquet", "delta")
OUTPUT_FORMATS: Final = ("delta", "parquet")
MODES: Final = ("full", "incremental")

_SPAN: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$", re.IGNORECASE)
_SPAN_SECONDS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_span(text: str, option: str = "--stall-span") -> float:
    """Seconds in a span such as `90m`, `6h`, `1.5d` (units s, m, h, d, w)."""
    match = _SPAN.match(str(text))
    if match is None:
        raise InvalidConfigError(
            f"{option} {text!r}: expected a number and a unit s, m, h, d or w, e.g. 6h"
        )
    seconds = float(match.group(1)) * _SPAN_SECONDS[match.group(2).lower()]
    if seconds <= 0:
        raise InvalidConfigError(f"{option} {text!r}: the span must be longer than 0")
    return seconds


@dataclass(frozen=True)
class JobConfig:
    """Everything one run needs. Paths may be local folders or any Hadoop URI; `share_state`
    may also be `kafka://HOST:PORT` to read the live topic."""

    share_state: str
    output: str | None = None
    consumer_offsets: str | None = None
    input_format: str = "auto"
    output_format: str = "delta"
    kafka_version: str = "auto"
    delivery_count_limit: int = 5
    end_offsets: str | None = None
    mode: str = "full"
    #: Replay only up to here: a state-topic offset (digits) or an ISO-8601 timestamp.
    as_of: str | None = None
    #: No start-offset progress (or partitions initializing) this long is reported.
    stall_span: str = "24h"
    #: Partitions of __share_group_state, or "auto" (Kafka's default 50 or the highest
    #: exported partition + 1, whichever fits the export).
    state_topic_partitions: int | str = "auto"
    #: How long a kafka:// input's broker has to answer before the run stops (Spark's Kafka
    #: source would retry an unreachable address without end).
    kafka_timeout: str = "60s"

    def read_paths(self) -> dict[str, str | None]:
        """What a run reads, by the option that names it (to name it in errors). The output
        is read too: an incremental run reads the earlier run's tables."""
        return {
            "--share-state": self.share_state,
            "--consumer-offsets": self.consumer_offsets,
            "--end-offsets": self.end_offsets,
            "the earlier output in --output": self.output,
        }

    def __post_init__(self) -> None:
        if not self.share_state:
            raise InvalidConfigError("--share-state is required: the export of __share_group_state")
        if self.input_format not in INPUT_FORMATS:
            raise InvalidConfigError(
                f"--input-format {self.input_format!r}: choose one of {', '.join(INPUT_FORMATS)}"
            )
        if self.output_format not in OUTPUT_FORMATS:
            raise InvalidConfigError(
                f"--output-format {self.output_format!r}: choose one of {', '.join(OUTPUT_FORMATS)}"
            )
        if self.mode not in MODES:
            raise InvalidConfigError(f"--mode {self.mode!r}: choose one of {', '.join(MODES)}")
        parse_kafka_version(self.kafka_version)
        if self.as_of is not None:
            self._as_of()
        if (
            isinstance(self.delivery_count_limit, bool)
            or not isinstance(self.delivery_count_limit, int)
            or self.delivery_count_limit < 1
        ):
            raise InvalidConfigError(
                f"--delivery-count-limit {self.delivery_count_limit!r}: expected a whole number"
                " >= 1 (Kafka's group.share.delivery.count.limit, default 5)"
            )
        parse_span(self.stall_span)
        parse_span(self.kafka_timeout, "--kafka-timeout")
        self._state_topic_partitions()

    def validate_for_run(self, spark: SparkSession | None = None) -> str:
        """Check what a run that writes the tables needs besides the options one by one,
        before any work: options that go together, and an `--output` it can write that is
        neither an input nor inside one nor around one. Return the output folder (without a
        trailing `/`). With `spark`, a remote `--output` that is a file is refused too."""
        if self.output is None:
            raise InvalidConfigError("--output is required (on the command line or in --config)")
        if self.mode == "incremental" and self.output_format != "delta":
            raise InvalidConfigError(
                "--mode incremental needs --output-format delta (it updates tables in place)"
            )
        if self.mode == "incremental" and self.as_of is not None:
            raise InvalidConfigError("--as-of replays a past state: run it with --mode full")
        from sharestate.backend import backend

        files_here = spark is None or backend(spark).local_files
        problem = output_overlap(self)
        if problem is None and files_here:
            problem = local_output_problem(self.output)
        if problem is None and spark is not None:
            problem = remote_output_problem(spark, self.output) or _parquet_output_problem(
                spark, self
            )
        if problem is not None:
            raise InvalidConfigError(problem)
        return self.output.rstrip("/")

    def _state_topic_partitions(self) -> int | None:
        value = self.state_topic_partitions
        if isinstance(value, str) and value.strip().lower() == "auto":
            return None
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidConfigError(
                f"--state-topic-partitions {self.state_topic_partitions!r}: expected a whole"
                " number >= 1 (Kafka's share.coordinator.state.topic.num.partitions) or auto"
            )
        return value

    @property
    def state_topic_partition_count(self) -> int | None:
        """The partition count of __share_group_state; None: infer it from the export."""
        return self._state_topic_partitions()

    @property
    def stall_span_seconds(self) -> float:
        return parse_span(self.stall_span)

    @property
    def kafka_timeout_seconds(self) -> float:
        return parse_span(self.kafka_timeout, "--kafka-timeout")

    def _as_of(self) -> int | datetime:
        text = str(self.as_of).strip()
        if text.isdigit():
            return int(text)
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidConfigError(
                f"--as-of {self.as_of!r}: expected a state-topic offset (e.g. 1234) or an "
                "ISO-8601 timestamp (e.g. 2026-11-21T14:05:00Z)"
            ) from None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

    @property
    def as_of_offset(self) -> int | None:
        value = self._as_of() if self.as_of is not None else None
        return value if isinstance(value, int) else None

    @property
    def as_of_timestamp(self) -> datetime | None:
        value = self._as_of() if self.as_of is not None else None
        return value if isinstance(value, datetime) else None


# --- where --output may be --------------------------------------------------------------


def _path_inputs(config: JobConfig) -> dict[str, str]:
    """The inputs that are paths (not kafka://), by option."""
    from sharestate.io.exports import is_kafka_uri

    named = {
        "--share-state": config.share_state,
        "--consumer-offsets": config.consumer_offsets,
        "--end-offsets": config.end_offsets,
    }
    return {option: path for option, path in named.items() if path and not is_kafka_uri(path)}


def _comparable(path: str) -> str:
    """`path` in one form for all spellings of it: a local path absolute, symbolic links
    resolved; a URI as scheme://authority/normalised-path."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return os.path.realpath(parsed.path if parsed.scheme == "file" else path)
    return f"{parsed.scheme}://{parsed.netloc}{posixpath.normpath(parsed.path or '/')}"


def _within(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def output_overlap(config: JobConfig) -> str | None:
    """Why `--output` cannot be where it is relative to the inputs, or None: the same
    folder as an input, inside one (the tables would land among the export's files), or
    holding one (a run replaces what is under --output)."""
    if config.output is None:
        return None
    output = _comparable(config.output)
    for option, path in _path_inputs(config).items():
        where = _comparable(path)
        if where == output:
            return (
                f"--output {config.output} is the same folder as {option} {path}: the job "
                "would write its tables into the export; give an --output outside every input"
            )
        if _within(output, where):
            return (
                f"--output {config.output} is inside {option} {path}: the job would write its "
                "tables among the export's files (and later reads of the export would take "
                "them for part of it); give an --output outside every input"
            )
        if _within(where, output):
            return (
                f"{option} {path} is inside --output {config.output}: a run replaces what is "
                "under --output; give an input outside it"
            )
    return None


def local_output_problem(output: str) -> str | None:
    """Why a local `--output` cannot be written (an existing file, a folder this process
    cannot write, or a path under a file), or None; remote outputs give None."""
    parsed = urlparse(output)
    if parsed.scheme not in ("", "file"):
        return None
    path = os.path.abspath(parsed.path if parsed.scheme == "file" else output)
    if os.path.exists(path):
        if not os.path.isdir(path):
            return (
                f"--output {output} is an existing file: give a folder (the job writes one "
                "sub-folder per table)"
            )
        if not os.access(path, os.W_OK | os.X_OK):
            return f"--output {output}: the folder is not writable by this user"
        return None
    ancestor = os.path.dirname(path)
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        return f"--output {output} cannot be created: {ancestor} is a file"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"--output {output} cannot be created: {ancestor} is not writable by this user"
    return None


def _parquet_output_problem(spark: SparkSession, config: JobConfig) -> str | None:
    """Why the session cannot write Parquet tables at `--output`, or None: a Parquet table
    is written beside the old one and swapped in by renames (readers never see half of
    one), which need a file system this process reaches."""
    if config.output_format != "parquet" or config.output is None:
        return None
    from sharestate.io.files import file_system

    if file_system(spark, config.output) is not None:
        return None
    return (
        f"--output-format parquet: this Spark Connect session cannot rename files at "
        f"--output {config.output} (a Parquet table is swapped in by renames, so that no "
        "reader sees half of one); use --output-format delta, whose commits Spark makes"
    )


def remote_output_problem(spark: SparkSession, output: str) -> str | None:
    """A remote `--output` that is an existing file (through Hadoop's file system), or None;
    None too when it cannot be told (Spark Connect: no file-system handle)."""
    if urlparse(output).scheme in ("", "file"):
        return None
    from sharestate.io.files import file_system

    try:
        files = file_system(spark, output)
        is_file = files is not None and files.is_file(output)
    except Exception:  # no file system for the scheme: Spark says so later
        return None
    return f"--output {output} is an existing file: give a folder" if is_file else None


CONFIG_KEYS: Final = tuple(f.name for f in fields(JobConfig))


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Options from a TOML file: top-level keys named like the options, with `_` for `-`."""
    file = Path(path)
    try:
        with file.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise InvalidConfigError(f"--config {path}: no such file") from None
    except tomllib.TOMLDecodeError as err:
        raise InvalidConfigError(f"--config {path}: not valid TOML: {err}") from None
    unknown = sorted(set(data) - set(CONFIG_KEYS))
    if unknown:
        raise InvalidConfigError(
            f"--config {path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(CONFIG_KEYS)}"
        )
    return data


def build_config(file_values: dict[str, Any], overrides: dict[str, Any]) -> JobConfig:
    """File values, then command-line values that were given (not None) on top."""
    merged = dict(file_values)
    merged.update({k: v for k, v in overrides.items() if v is not None})
    if "share_state" not in merged:
        raise InvalidConfigError(
            "--share-state is required (on the command line or in the --config file)"
        )
    try:
        return JobConfig(**merged)
    except TypeError as err:
        raise InvalidConfigError(f"invalid configuration: {err}") from None
