package org.apache.kafka.coordinator.share;

import org.apache.kafka.server.share.SharePartitionKey;

/**
 * Harness code (not Kafka code): the only class of the sharestate harness that lives in Kafka's
 * package, because {@code ShareCoordinatorShard.getShareStateMapValue} is package-private
 * ("visible for testing"). It only forwards to that getter; everything else uses public API.
 * This works on the class path (Kafka's jars are not sealed and not used as modules).
 */
public final class HarnessShardAccess {
    private HarnessShardAccess() { }

    /** The shard's current {@code shareStateMap} entry for the key, or null when the key has no state. */
    public static ShareGroupOffset state(ShareCoordinatorShard shard, SharePartitionKey key) {
        return shard.getShareStateMapValue(key);
    }
}
