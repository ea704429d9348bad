"""The project's error hierarchy.

`SharestateError` is the root. Errors in what the user asked for (options, inputs) are
`UsageError`s: the command line prints their message as one line and exits with code 2.
A run that fails for a reason the user can act on outside the options (the driver out of
memory) is a `RunFailed`: one line, exit code 1, the trace in a log file the line names.
`DecodeError` never escapes a run: it becomes a row in `quarantine` with its message.
"""

from __future__ import annotations


class SharestateError(Exception):
    """Root of every error this package raises on purpose."""


class UsageError(SharestateError):
    """A problem with what the user asked for; the message alone says what to fix."""


class InvalidConfigError(UsageError):
    """An option or config-file value is invalid."""


class InputError(UsageError):
    """An input path cannot be read as an export of a Kafka topic."""


class MissingTopicError(InputError):
    """A `kafka://` input's cluster has no such topic (yet: Kafka creates
    `__share_group_state` when a share group first stores state). `follow` waits for it."""


class InputSchemaError(InputError):
    """The input exists but does not have the Kafka-record schema."""


class SparkSetupError(UsageError):
    """The Spark session lacks something the run needs (e.g. Delta Lake's jar)."""


class RunFailed(SharestateError):
    """A run stopped for a reason its message says in one line, with what to change."""


class DecodeError(SharestateError):
    """A record's bytes cannot be decoded. The message is the quarantine reason."""
