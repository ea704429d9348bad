"""What Apache Kafka defines, in plain Python (no Spark, no Arrow).

* `wire`: the wire primitives (fixed-width integers, varints, compact strings, tagged fields).
* `schemas`: the field tables of every record layout Kafka has shipped, per release.
* `records`: the reference decoder of one record (key and value bytes -> dict).
* `partitioning`: which partition of `__share_group_state` / `__consumer_offsets` Kafka
  puts a key on.
"""
