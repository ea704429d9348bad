"""Typed job configuration and every check of it.

A `JobConfig` comes from command-line options, a TOML config file (`--config`), or a
notebook building one directly; all three end in the same checks. Each option is checked
when the config is built; what a run that writes tables needs besides (an output, and
options that go together) in `JobConfig.validate_for_run`, which the entry points call
before any Spark work.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from sharestate.errors import InvalidConfigError
from sharestate.kafka.records import parse_kafka_version

INPUT_FORMATS: Final = ("auto", "parquet", "delta")
OUTPUT_FORMATS: Final = ("delta", "parquet")
MODES: Final = ("full", "incremental")

_SPAN: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$", re.IGNORECASE)
_SPAN_SECONDS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_span(text: str) -> float:
    """Seconds in a span such as `90m`, `6h`, `1.5d` (units s, m, h, d, w)."""
    match = _SPAN.match(str(text))
    if match is None:
        raise InvalidConfigError(
            f"--stall-span {text!r}: expected a number and a unit s, m, h, d or w, e.g. 6h"
        )
    seconds = float(match.group(1)) * _SPAN_SECONDS[match.group(2).lower()]
    if seconds <= 0:
        raise InvalidConfigError(f"--stall-span {text!r}: the span must be longer than 0")
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
        self._state_topic_partitions()

    def validate_for_run(self) -> str:
        """Check what a run that writes the tables needs besides the options one by one;
        return its output folder (without a trailing `/`)."""
        if self.output is None:
            raise InvalidConfigError("--output is required (on the command line or in --config)")
        if self.mode == "incremental" and self.output_format != "delta":
            raise InvalidConfigError(
                "--mode incremental needs --output-format delta (it updates tables in place)"
            )
        if self.mode == "incremental" and self.as_of is not None:
            raise InvalidConfigError("--as-of replays a past state: run it with --mode full")
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
