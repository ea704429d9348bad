"""sharestate: decode, replay and audit Apache Kafka share-group state (KIP-932) with PySpark.

The pure core needs no Spark: `sharestate.records` decodes one record's bytes,
`sharestate.arrow_decode` whole Arrow batches. `sharestate.spark_decode` wraps them for
DataFrames, `sharestate.pipeline.compute(spark, config)` returns every table as DataFrames
(for notebooks), and `sharestate.job.main(spark, config)` also writes them.
"""

from __future__ import annotations

from sharestate.config import JobConfig
from sharestate.errors import DecodeError, InputError, InputSchemaError, SharestateError, UsageError
from sharestate.records import decode_group_record, decode_share_state

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
