"""sharestate: decode, replay and audit Apache Kafka share-group state (KIP-932) with PySpark.

The pure core needs no Spark: `sharestate.kafka.records` decodes one record's bytes,
`sharestate.decode.arrow` whole Arrow batches. `sharestate.decode.spark` wraps them for
DataFrames, `sharestate.job.compute(spark, config)` returns every table as DataFrames (for
notebooks), and `sharestate.job.main(spark, config)` also writes them.
"""

from __future__ import annotations

from sharestate.errors import DecodeError, InputError, InputSchemaError, SharestateError, UsageError
from sharestate.job.config import JobConfig
from sharestate.kafka.records import decode_group_record, decode_share_state

__version__ = "0.1.0"

__all__ = [
    "DecodeError",
    "InputError",
    "InputSchemaError",
    "JobConfig",
    "SharestateError",
    "UsageError",
    "__version__",
    "decode_group_record",
    "decode_share_state",
]
