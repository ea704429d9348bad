package sharestate.harness;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.message.DeleteShareGroupStateRequestData;
import org.apache.kafka.common.message.DeleteShareGroupStateResponseData;
import org.apache.kafka.common.message.InitializeShareGroupStateRequestData;
import org.apache.kafka.common.message.InitializeShareGroupStateResponseData;
import org.apache.kafka.common.message.ReadShareGroupStateRequestData;
import org.apache.kafka.common.message.ReadShareGroupStateResponseData;
import org.apache.kafka.common.message.WriteShareGroupStateRequestData;
import org.apache.kafka.common.message.WriteShareGroupStateResponseData;
import org.apache.kafka.common.metadata.PartitionRecord;
import org.apache.kafka.common.metadata.TopicRecord;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorResult;
import org.apache.kafka.coordinator.share.HarnessShardAccess;
import org.apache.kafka.coordinator.share.ShareCoordinatorConfig;
import org.apache.kafka.coordinator.share.ShareCoordinatorShard;
import org.apache.kafka.coordinator.share.ShareGroupOffset;
import org.apache.kafka.coordinator.share.metrics.ShareCoordinatorMetrics;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.image.MetadataProvenance;
import org.apache.kafka.server.share.SharePartitionKey;
import org.apache.kafka.server.share.persister.PersisterStateBatch;
import org.apache.kafka.timeline.SnapshotRegistry;

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * One real {@link ShareCoordinatorShard} of the Kafka release on the class path, built as the
 * share coordinator builds it ({@code ShareCoordinatorShard.Builder} with a {@link ShareCoordinatorConfig},
 * a {@link SnapshotRegistry}, {@link ShareCoordinatorMetrics} and a {@link Time}), plus the calls whose
 * signatures differ between releases, done by reflection so one source tree compiles against every release:
 * <ul>
 *   <li>{@code SnapshotRegistry(LogContext)}: LogContext moved to {@code org.apache.kafka.common.utils.internals} in 4.4;</li>
 *   <li>metadata image: 4.0 {@code onNewMetadataImage(MetadataImage, MetadataDelta)} (its {@code onLoaded} ignores
 *       the image), 4.1 {@code onLoaded(MetadataImage)}, 4.2+ {@code onLoaded(CoordinatorMetadataImage)} with a
 *       {@code KRaftCoordinatorMetadataImage};</li>
 *   <li>{@code initializeState}, {@code deleteState}, {@code snapshotColdPartitions}, {@code maybeCleanupShareState}: 4.1+;</li>
 *   <li>{@code WriteShareGroupStateRequestData.PartitionData.setDeliveryCompleteCount}: 4.2+;</li>
 *   <li>{@code ShareGroupOffset.createTimestamp/writeTimestamp}: 4.1+; {@code deliveryCompleteCount}: 4.2+.</li>
 * </ul>
 */
final class KafkaShard implements AutoCloseable {
    static final String STATE_TOPIC = "__share_group_state";
    static final String RECORDS_PER_SNAPSHOT_CONFIG = "share.coordinator.snapshot.update.records.per.snapshot";
    static final String COLD_INTERVAL_CONFIG = "share.coordinator.cold.partition.snapshot.interval.ms";

    static final Method INITIALIZE = Compat.optionalMethod(ShareCoordinatorShard.class, "initializeState",
        InitializeShareGroupStateRequestData.class);
    static final Method DELETE = Compat.optionalMethod(ShareCoordinatorShard.class, "deleteState",
        DeleteShareGroupStateRequestData.class);
    static final Method COLD_SNAPSHOT = Compat.optionalMethod(ShareCoordinatorShard.class, "snapshotColdPartitions");
    static final Method CLEANUP = Compat.optionalMethod(ShareCoordinatorShard.class, "maybeCleanupShareState", Set.class);
    static final Method REQUEST_SET_DCC = Compat.optionalMethod(WriteShareGroupStateRequestData.PartitionData.class,
        "setDeliveryCompleteCount", int.class);
    static final Method STATE_DCC = Compat.optionalMethod(ShareGroupOffset.class, "deliveryCompleteCount");
    static final Method STATE_CREATE_TS = Compat.optionalMethod(ShareGroupOffset.class, "createTimestamp");
    static final Method STATE_WRITE_TS = Compat.optionalMethod(ShareGroupOffset.class, "writeTimestamp");
    static final boolean HAS_COLD_INTERVAL_CONFIG = ShareCoordinatorConfig.CONFIG_DEF.names().contains(COLD_INTERVAL_CONFIG);

    private static final Constructor<?> REGISTRY_CTOR;
    private static final Object LOG_CONTEXT;
    private static final Map<String, ShareCoordinatorConfig> CONFIGS = new HashMap<>();

    static {
        Constructor<?> ctor = null;
        Object logContext = null;
        for (Constructor<?> c : SnapshotRegistry.class.getConstructors()) {
            if (c.getParameterCount() == 1 && c.getParameterTypes()[0].getSimpleName().equals("LogContext")) {
                ctor = c;
                try {
                    logContext = c.getParameterTypes()[0].getConstructor().newInstance();
                } catch (ReflectiveOperationException e) {
                    throw new IllegalStateException(e);
                }
            }
        }
        if (ctor == null) {
            throw new IllegalStateException("SnapshotRegistry(LogContext) not found");
        }
        REGISTRY_CTOR = ctor;
        LOG_CONTEXT = logContext;
    }

    /** Result of one request handler call: Kafka's records and the partition's error code. */
    record Outcome(List<CoordinatorRecord> records, short errorCode, Object partitionResult) { }

    final ShareCoordinatorShard shard;
    private final ShareCoordinatorMetrics metrics;

    KafkaShard(int recordsPerSnapshot, int coldIntervalMs, Time time, int statePartition) {
        SnapshotRegistry registry;
        try {
            registry = (SnapshotRegistry) REGISTRY_CTOR.newInstance(LOG_CONTEXT);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
        this.metrics = new ShareCoordinatorMetrics();
        this.shard = new ShareCoordinatorShard.Builder(config(recordsPerSnapshot, coldIntervalMs))
            .withSnapshotRegistry(registry)
            .withCoordinatorMetrics(metrics)
            .withTopicPartition(new TopicPartition(STATE_TOPIC, statePartition))
            .withTime(time)
            .build();
    }

    static synchronized ShareCoordinatorConfig config(int recordsPerSnapshot, int coldIntervalMs) {
        return CONFIGS.computeIfAbsent(recordsPerSnapshot + "/" + coldIntervalMs, k -> {
            Map<String, Object> props = new HashMap<>();
            props.put(RECORDS_PER_SNAPSHOT_CONFIG, recordsPerSnapshot);
            if (HAS_COLD_INTERVAL_CONFIG) {
                props.put(COLD_INTERVAL_CONFIG, coldIntervalMs);
            }
            return new ShareCoordinatorConfig(new AbstractConfig(ShareCoordinatorConfig.CONFIG_DEF, props));
        });
    }

    /** Gives the shard a metadata image with these topics (id -> partition count), as the runtime does on load. */
    void loadMetadata(Map<Uuid, Integer> topics) {
        MetadataDelta delta = new MetadataDelta.Builder().setImage(MetadataImage.EMPTY).build();
        for (Map.Entry<Uuid, Integer> t : topics.entrySet()) {
            delta.replay(new TopicRecord().setName("topic-" + t.getKey()).setTopicId(t.getKey()));
            for (int p = 0; p < t.getValue(); p++) {
                delta.replay(new PartitionRecord().setPartitionId(p).setTopicId(t.getKey())
                    .setReplicas(List.of(0)).setIsr(List.of(0)).setLeader(0).setLeaderEpoch(0).setPartitionEpoch(0));
            }
        }
        MetadataImage image = delta.apply(MetadataProvenance.EMPTY);
        Method legacyLoaded = Compat.optionalMethod(ShareCoordinatorShard.class, "onLoaded", MetadataImage.class);
        if (legacyLoaded != null) {
            // 4.0 and 4.1. In 4.0 onLoaded does not keep the image; onNewMetadataImage does.
            Compat.invoke(legacyLoaded, shard, image);
            Compat.invoke(Compat.method(ShareCoordinatorShard.class, "onNewMetadataImage", MetadataImage.class,
                MetadataDelta.class), shard, image, delta);
        } else {
            try {
                Class<?> iface = Class.forName("org.apache.kafka.coordinator.common.runtime.CoordinatorMetadataImage");
                Object wrapped = Class.forName("org.apache.kafka.coordinator.common.runtime.KRaftCoordinatorMetadataImage")
                    .getConstructor(MetadataImage.class).newInstance(image);
                Compat.invoke(Compat.method(ShareCoordinatorShard.class, "onLoaded", iface), shard, wrapped);
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException(e);
            }
        }
    }

    // ---------------------------------------------------------------- request handlers (writer)

    Outcome write(SpKey k, int stateEpoch, int leaderEpoch, long startOffset, int deliveryCompleteCount,
                  List<long[]> batches) {
        List<WriteShareGroupStateRequestData.StateBatch> sb = new ArrayList<>(batches.size());
        for (long[] b : batches) {
            sb.add(new WriteShareGroupStateRequestData.StateBatch().setFirstOffset(b[0]).setLastOffset(b[1])
                .setDeliveryState((byte) b[2]).setDeliveryCount((short) b[3]));
        }
        WriteShareGroupStateRequestData.PartitionData pd = new WriteShareGroupStateRequestData.PartitionData()
            .setPartition(k.partition()).setStateEpoch(stateEpoch).setLeaderEpoch(leaderEpoch)
            .setStartOffset(startOffset).setStateBatches(sb);
        if (REQUEST_SET_DCC != null) {
            Compat.invoke(REQUEST_SET_DCC, pd, deliveryCompleteCount);
        }
        WriteShareGroupStateRequestData req = new WriteShareGroupStateRequestData().setGroupId(k.groupId())
            .setTopics(List.of(new WriteShareGroupStateRequestData.WriteStateData().setTopicId(k.topicId())
                .setPartitions(List.of(pd))));
        CoordinatorResult<WriteShareGroupStateResponseData, CoordinatorRecord> r = shard.writeState(req);
        WriteShareGroupStateResponseData.PartitionResult pr = r.response().results().get(0).partitions().get(0);
        return new Outcome(r.records(), pr.errorCode(), pr);
    }

    /** readStateAndMaybeUpdateLeaderEpoch; the partition result is a ReadShareGroupStateResponseData.PartitionResult. */
    Outcome read(SpKey k, int leaderEpoch) {
        ReadShareGroupStateRequestData req = new ReadShareGroupStateRequestData().setGroupId(k.groupId())
            .setTopics(List.of(new ReadShareGroupStateRequestData.ReadStateData().setTopicId(k.topicId())
                .setPartitions(List.of(new ReadShareGroupStateRequestData.PartitionData()
                    .setPartition(k.partition()).setLeaderEpoch(leaderEpoch)))));
        CoordinatorResult<ReadShareGroupStateResponseData, CoordinatorRecord> r = shard.readStateAndMaybeUpdateLeaderEpoch(req);
        ReadShareGroupStateResponseData.PartitionResult pr = r.response().results().get(0).partitions().get(0);
        return new Outcome(r.records(), pr.errorCode(), pr);
    }

    @SuppressWarnings("unchecked")
    Outcome initialize(SpKey k, int stateEpoch, long startOffset) {
        InitializeShareGroupStateRequestData req = new InitializeShareGroupStateRequestData().setGroupId(k.groupId())
            .setTopics(List.of(new InitializeShareGroupStateRequestData.InitializeStateData().setTopicId(k.topicId())
                .setPartitions(List.of(new InitializeShareGroupStateRequestData.PartitionData()
                    .setPartition(k.partition()).setStateEpoch(stateEpoch).setStartOffset(startOffset)))));
        CoordinatorResult<InitializeShareGroupStateResponseData, CoordinatorRecord> r =
            (CoordinatorResult<InitializeShareGroupStateResponseData, CoordinatorRecord>) Compat.invoke(INITIALIZE, shard, req);
        InitializeShareGroupStateResponseData.PartitionResult pr = r.response().results().get(0).partitions().get(0);
        return new Outcome(r.records(), pr.errorCode(), pr);
    }

    @SuppressWarnings("unchecked")
    Outcome delete(SpKey k) {
        DeleteShareGroupStateRequestData req = new DeleteShareGroupStateRequestData().setGroupId(k.groupId())
            .setTopics(List.of(new DeleteShareGroupStateRequestData.DeleteStateData().setTopicId(k.topicId())
                .setPartitions(List.of(new DeleteShareGroupStateRequestData.PartitionData().setPartition(k.partition())))));
        CoordinatorResult<DeleteShareGroupStateResponseData, CoordinatorRecord> r =
            (CoordinatorResult<DeleteShareGroupStateResponseData, CoordinatorRecord>) Compat.invoke(DELETE, shard, req);
        DeleteShareGroupStateResponseData.PartitionResult pr = r.response().results().get(0).partitions().get(0);
        return new Outcome(r.records(), pr.errorCode(), pr);
    }

    @SuppressWarnings("unchecked")
    List<CoordinatorRecord> snapshotColdPartitions() {
        return ((CoordinatorResult<Void, CoordinatorRecord>) Compat.invoke(COLD_SNAPSHOT, shard)).records();
    }

    @SuppressWarnings("unchecked")
    List<CoordinatorRecord> cleanupTopics(Set<Uuid> deleted) {
        return ((CoordinatorResult<Void, CoordinatorRecord>) Compat.invoke(CLEANUP, shard, deleted)).records();
    }

    // ---------------------------------------------------------------- replay and state (reader)

    /** What the coordinator runtime / loader does with a record at an offset of the state topic (no producer id). */
    void replay(long offset, CoordinatorRecord record) {
        shard.replay(offset, -1L, (short) -1, record);
    }

    ShareGroupOffset state(SpKey k) {
        return HarnessShardAccess.state(shard, k.kafkaKey());
    }

    /** The shard's pruning cut-off ({@code lastRedundantOffset}), or null when Kafka reports none. */
    Long pruningCutoff() {
        Optional<Long> v = shard.lastRedundantOffset().response();
        return v.orElse(null);
    }

    /** One key's state as written in the corpus; fields absent in this release are null. */
    static ObjectNode stateJson(ShareGroupOffset s) {
        ObjectNode o = Json.F.objectNode();
        o.put("start_offset", s.startOffset());
        o.put("state_epoch", s.stateEpoch());
        o.put("leader_epoch", s.leaderEpoch());
        o.put("snapshot_epoch", s.snapshotEpoch());
        if (STATE_CREATE_TS != null) {
            o.put("create_timestamp", (Long) Compat.invoke(STATE_CREATE_TS, s));
            o.put("write_timestamp", (Long) Compat.invoke(STATE_WRITE_TS, s));
        } else {
            o.putNull("create_timestamp");
            o.putNull("write_timestamp");
        }
        if (STATE_DCC != null) {
            o.put("delivery_complete_count", (Integer) Compat.invoke(STATE_DCC, s));
        } else {
            o.putNull("delivery_complete_count");
        }
        o.set("batches", batchesJson(s.stateBatches()));
        return o;
    }

    static ArrayNode batchesJson(List<PersisterStateBatch> batches) {
        ArrayNode a = Json.F.arrayNode(batches.size());
        for (PersisterStateBatch b : batches) {
            a.add(Json.F.arrayNode(4).add(b.firstOffset()).add(b.lastOffset()).add(b.deliveryState()).add(b.deliveryCount()));
        }
        return a;
    }

    static int deliveryCompleteCount(ShareGroupOffset s) {
        return STATE_DCC == null ? -1 : (Integer) Compat.invoke(STATE_DCC, s);
    }

    @Override
    public void close() {
        try {
            metrics.close();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** A share-partition key: group id, topic id, partition. */
    record SpKey(String groupId, Uuid topicId, int partition, SharePartitionKey kafkaKey, String id) {
        static SpKey of(String groupId, Uuid topicId, int partition) {
            return new SpKey(groupId, topicId, partition, SharePartitionKey.getInstance(groupId, topicId, partition),
                groupId + "|" + topicId + "|" + partition);
        }

        ObjectNode json() {
            return Json.obj("group_id", groupId, "topic_id", topicId.toString(), "partition", partition);
        }
    }
}
