"""Decode: exported Kafka records -> decoded rows and quarantined rows.

* `columns`: the Arrow types of what the decoders produce (Spark's types derive from them).
* `arrow`: whole Arrow batches at a time, with a numpy fast path; every row it is not sure
  of goes through the reference decoder (`sharestate.kafka.records`).
* `spark`: DataFrame -> decoded DataFrames and the quarantine.
"""
