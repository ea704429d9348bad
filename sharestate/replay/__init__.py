"""Replay: decoded `share_state_records` -> the state Kafka's share coordinator holds.

* `combiner`: Kafka's batch combiner, release by release.
* `state`: one record applied to a state (the readable reference).
* `fold`: the replay's inner loop over sorted Arrow batches (pure, no Spark).
* `spark`: the distributed replay (one shuffle by share-partition, a sort, the fold in
  `mapInArrow` or on the JVM) and `as_of`.
"""

from __future__ import annotations

from sharestate.replay.spark import Replayed, as_of, replay

__all__ = ["Replayed", "as_of", "replay"]
