"""Typed job configuration, validated on construction.

A `JobConfig` comes from command-line options, a TOML config file (`--config`), or a
notebook building one directly; all three end in the same checks.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from sharestate.errors import InvalidConfigError
from sharestate.records import parse_kafka_version

INPUT_FORMATS: Final = ("auto", "parquet", "delta")
OUTPUT_FORMATS: Final = ("delta", "parquet")
MODES: Final = ("full", "incremental")


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
