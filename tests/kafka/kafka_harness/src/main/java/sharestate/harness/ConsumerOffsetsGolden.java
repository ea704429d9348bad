package sharestate.harness;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordHelpers;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.modern.MemberState;

import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * Golden records for {@code __consumer_offsets}, serialized by {@link GroupCoordinatorRecordSerde}:
 * every share-group record type of the release (9 in 4.0 only, 10-15) with values and tombstones,
 * plus a few records of other types (0, 1, 2, 3, 5, 6, 16, 17, 20) so a decoder can check it
 * classifies records by type. Tombstones and the simple epoch records are also rebuilt with
 * {@link GroupCoordinatorRecordHelpers} and must give identical bytes.
 */
final class ConsumerOffsetsGolden {
    static final String PKG = "org.apache.kafka.coordinator.group.generated";
    static final long T0 = 1735689600000L;

    private final GoldenWriter w;
    private final boolean has9 = Schemas.exists("ShareGroupPartitionMetadataKey");            // 4.0 only
    private final boolean metadataHash11 = Schemas.hasField("ShareGroupMetadataValue", "MetadataHash"); // 4.1+
    private final boolean initializing15 = Schemas.hasField("ShareGroupStatePartitionMetadataValue", "InitializingTopics"); // 4.1+
    private final boolean timestamp12 = Schemas.hasField("ShareGroupTargetAssignmentMetadataValue", "AssignmentTimestamp"); // 4.3+
    private final boolean legacyOffsetCommitClass = Schemas.exists("LegacyOffsetCommitKey"); // 4.1+
    private final boolean offsetCommitTopicId = Schemas.hasField("OffsetCommitValue", "topicId"); // 4.1+
    private final boolean consumerMetadataHash = Schemas.hasField("ConsumerGroupMetadataValue", "MetadataHash"); // 4.1+
    private final boolean streams = Schemas.exists("StreamsGroupMetadataKey"); // 4.1+

    private static final Uuid TOPIC_A = Uuid.fromString("Uj5wn_FqTXirEASvVZRY1w");
    private static final Uuid TOPIC_B = new Uuid(0x0123456789abcdefL, 0xfedcba9876543210L);
    private static final Uuid TOPIC_C = Uuid.ONE_UUID;
    private static final String MEMBER = "AAECAwQFBgcICQoLDA0ODw"; // a 22-char Uuid string, as Kafka uses

    ConsumerOffsetsGolden(Path file) {
        this.w = new GoldenWriter(file, new GroupCoordinatorRecordSerde(), PKG);
    }

    String generate() {
        try (GoldenWriter writer = w) {
            if (has9) {
                type9();
            }
            type10();
            type11();
            type12();
            type13();
            type14();
            type15();
            groupIdVariants();
            otherTypes();
            randomShareRecords(100);
            return writer.summary();
        }
    }

    // ---------------------------------------------------------------- share-group types

    /** 9 ShareGroupPartitionMetadata (4.0 only; removed in 4.1, where the id is unused). */
    private void type9() {
        String r = "ShareGroupPartitionMetadata";
        w.value("t9-empty", 9, r, gkey("sg"), 0, Json.obj("topics", Json.arr()));
        w.value("t9-topics", 9, r, gkey("sg"), 0, Json.obj("topics", Json.arr(
            Json.obj("topicId", TOPIC_A, "topicName", "orders", "numPartitions", 3, "partitionMetadata", Json.arr(
                Json.obj("partition", 0, "racks", Json.arr("rack-a", "rack-b")),
                Json.obj("partition", 1, "racks", Json.arr()),
                Json.obj("partition", 2, "racks", Json.arr("rack-c")))),
            Json.obj("topicId", TOPIC_B, "topicName", "tópico-日本", "numPartitions", 0, "partitionMetadata", Json.arr()))));
        tombstone("t9-tombstone", 9, r, gkey("sg"), helpers("newShareGroupSubscriptionMetadataTombstoneRecord"), "sg");
    }

    /** 10 ShareGroupMemberMetadata. */
    private void type10() {
        String r = "ShareGroupMemberMetadata";
        w.value("t10-rack-null", 10, r, mkey("sg", MEMBER), 0, Json.obj(
            "rackId", null, "clientId", "consumer-1", "clientHost", "/127.0.0.1",
            "subscribedTopicNames", Json.arr("orders", "payments")));
        w.value("t10-rack-set", 10, r, mkey("sg", MEMBER), 0, Json.obj(
            "rackId", "rack-1", "clientId", "consumer-1", "clientHost", "/10.0.0.1",
            "subscribedTopicNames", Json.arr("orders")));
        w.value("t10-rack-empty-no-topics", 10, r, mkey("sg", "m"), 0, Json.obj(
            "rackId", "", "clientId", "", "clientHost", "", "subscribedTopicNames", Json.arr()));
        w.value("t10-unicode", 10, r, mkey("grüppe-日本-😀", "member-😀"), 0, Json.obj(
            "rackId", "räck", "clientId", "clïent-日本", "clientHost", "/[::1]",
            "subscribedTopicNames", Json.arr("tópico", "日本", "😀")));
        tombstone("t10-tombstone", 10, r, mkey("sg", MEMBER),
            helpers("newShareGroupMemberSubscriptionTombstoneRecord"), "sg", MEMBER);
    }

    /** 11 ShareGroupMetadata: {Epoch} in 4.0; {Epoch, MetadataHash (not tagged)} in 4.1+. */
    private void type11() {
        String r = "ShareGroupMetadata";
        int[] epochs = {0, 1, 42, Integer.MAX_VALUE, -1};
        long[] hashes = {0L, 1L, -1L, Long.MAX_VALUE, Long.MIN_VALUE, 0x1234_5678_9abc_def0L};
        for (int i = 0; i < epochs.length; i++) {
            int epoch = epochs[i];
            long hash = hashes[i];
            ObjectNode v = Json.obj("epoch", epoch);
            if (metadataHash11) {
                v.put("metadataHash", hash);
            }
            CoordinatorRecord rec = w.value("t11-epoch-" + epoch, 11, r, gkey("sg"), 0, v);
            Method m = metadataHash11
                ? Compat.optionalMethod(GroupCoordinatorRecordHelpers.class, "newShareGroupEpochRecord", String.class, int.class, long.class)
                : Compat.optionalMethod(GroupCoordinatorRecordHelpers.class, "newShareGroupEpochRecord", String.class, int.class);
            if (m != null) {
                Object helper = metadataHash11 ? Compat.invoke(m, null, "sg", epoch, hash) : Compat.invoke(m, null, "sg", epoch);
                w.expectSameBytesAsKafkaHelper("t11-epoch-" + epoch, rec, (CoordinatorRecord) helper);
            }
        }
        if (metadataHash11) {
            w.value("t11-hash-min", 11, r, gkey("sg"), 0, Json.obj("epoch", 5, "metadataHash", Long.MIN_VALUE));
        }
        tombstone("t11-tombstone", 11, r, gkey("sg"), helpers("newShareGroupEpochTombstoneRecord"), "sg");
    }

    /** 12 ShareGroupTargetAssignmentMetadata: {AssignmentEpoch}; 4.3+ adds tagged AssignmentTimestamp (tag 0, default 0). */
    private void type12() {
        String r = "ShareGroupTargetAssignmentMetadata";
        Method epochOnly = Compat.optionalMethod(GroupCoordinatorRecordHelpers.class,            // 4.0-4.2
            "newShareGroupTargetAssignmentEpochRecord", String.class, int.class);
        Method withTimestamp = Compat.optionalMethod(GroupCoordinatorRecordHelpers.class,        // 4.3+
            "newShareGroupTargetAssignmentMetadataRecord", String.class, int.class, long.class);
        for (int epoch : new int[] {0, 1, Integer.MAX_VALUE, -1}) {
            // No AssignmentTimestamp given: the field (4.3+) stays at its default 0.
            CoordinatorRecord rec = w.value("t12-epoch-" + epoch, 12, r, gkey("sg"), 0, Json.obj("assignmentEpoch", epoch));
            if (epochOnly != null) {
                w.expectSameBytesAsKafkaHelper("t12-epoch-" + epoch, rec, (CoordinatorRecord) Compat.invoke(epochOnly, null, "sg", epoch));
            } else if (withTimestamp != null) {
                w.expectSameBytesAsKafkaHelper("t12-epoch-" + epoch, rec,
                    (CoordinatorRecord) Compat.invoke(withTimestamp, null, "sg", epoch, 0L));
            }
        }
        if (timestamp12) {
            long[] timestamps = {0L, 1L, T0, Long.MAX_VALUE, -1L};
            String[] names = {"explicit-default-0", "1", "t0", "max", "minus-1"};
            Method m = withTimestamp;
            for (int i = 0; i < timestamps.length; i++) {
                String name = "t12-timestamp-" + names[i];
                CoordinatorRecord rec = w.value(name, 12, r, gkey("sg"), 0,
                    Json.obj("assignmentEpoch", 7, "assignmentTimestamp", timestamps[i]));
                if (m != null) {
                    w.expectSameBytesAsKafkaHelper(name, rec, (CoordinatorRecord) Compat.invoke(m, null, "sg", 7, timestamps[i]));
                }
            }
        }
        tombstone("t12-tombstone", 12, r, gkey("sg"), helpers(
            "newShareGroupTargetAssignmentMetadataTombstoneRecord",   // 4.3+
            "newShareGroupTargetAssignmentEpochTombstoneRecord"), "sg"); // 4.0-4.2
    }

    /** 13 ShareGroupTargetAssignmentMember. */
    private void type13() {
        String r = "ShareGroupTargetAssignmentMember";
        w.value("t13-empty", 13, r, mkey("sg", MEMBER), 0, Json.obj("topicPartitions", Json.arr()));
        w.value("t13-one-topic", 13, r, mkey("sg", MEMBER), 0, Json.obj("topicPartitions", Json.arr(
            Json.obj("topicId", TOPIC_A, "partitions", new int[] {0, 1, 2}))));
        w.value("t13-several-topics", 13, r, mkey("sg", MEMBER), 0, Json.obj("topicPartitions", Json.arr(
            Json.obj("topicId", TOPIC_A, "partitions", new int[] {5, 0, 3}),
            Json.obj("topicId", TOPIC_B, "partitions", new int[] {}),
            Json.obj("topicId", TOPIC_C, "partitions", new int[] {Integer.MAX_VALUE, -1}))));
        w.value("t13-200-partitions", 13, r, mkey("sg", MEMBER), 0, Json.obj("topicPartitions", Json.arr(
            Json.obj("topicId", TOPIC_A, "partitions", range(200)))));
        tombstone("t13-tombstone", 13, r, mkey("sg", MEMBER),
            helpers("newShareGroupTargetAssignmentTombstoneRecord"), "sg", MEMBER);
    }

    /** 14 ShareGroupCurrentMemberAssignment: one record per MemberState value of the release. */
    private void type14() {
        String r = "ShareGroupCurrentMemberAssignment";
        for (MemberState state : MemberState.values()) {
            w.value("t14-state-" + state.name().toLowerCase(Locale.ROOT), 14, r, mkey("sg", MEMBER), 0, Json.obj(
                "memberEpoch", 10, "previousMemberEpoch", 9, "state", state.value(),
                "assignedPartitions", Json.arr(
                    Json.obj("topicId", TOPIC_A, "partitions", new int[] {0, 1}),
                    Json.obj("topicId", TOPIC_B, "partitions", new int[] {7}))));
        }
        w.value("t14-empty", 14, r, mkey("sg", MEMBER), 0, Json.obj(
            "memberEpoch", 0, "previousMemberEpoch", -1, "state", (byte) 0, "assignedPartitions", Json.arr()));
        w.value("t14-epoch-edges", 14, r, mkey("sg", MEMBER), 0, Json.obj(
            "memberEpoch", Integer.MAX_VALUE, "previousMemberEpoch", Integer.MIN_VALUE, "state", (byte) -1,
            "assignedPartitions", Json.arr(Json.obj("topicId", TOPIC_C, "partitions", new int[] {}))));
        tombstone("t14-tombstone", 14, r, mkey("sg", MEMBER),
            helpers("newShareGroupCurrentAssignmentTombstoneRecord"), "sg", MEMBER);
    }

    /** 15 ShareGroupStatePartitionMetadata: 4.0 {Initialized, Deleting}; 4.1+ {Initializing, Initialized, Deleting}. */
    private void type15() {
        String r = "ShareGroupStatePartitionMetadata";
        w.value("t15-empty", 15, r, gkey("sg"), 0, statePartitionValue(Json.arr(), Json.arr(), Json.arr()));
        ArrayNode initializing = Json.arr(
            Json.obj("topicId", TOPIC_C, "topicName", "new-topic", "partitions", new int[] {0, 1, 2, 3}));
        ArrayNode initialized = Json.arr(
            Json.obj("topicId", TOPIC_A, "topicName", "orders", "partitions", new int[] {0, 1, 2}),
            Json.obj("topicId", TOPIC_B, "topicName", "tópico-日本", "partitions", new int[] {}));
        ArrayNode deleting = Json.arr(Json.obj("topicId", Uuid.ZERO_UUID, "topicName", "gone"));
        w.value("t15-all", 15, r, gkey("sg"), 0, statePartitionValue(initializing, initialized, deleting));
        w.value("t15-initialized-only", 15, r, gkey("sg"), 0, statePartitionValue(Json.arr(), initialized, Json.arr()));
        w.value("t15-deleting-only", 15, r, gkey("sg"), 0, statePartitionValue(Json.arr(), Json.arr(), deleting));
        if (initializing15) {
            w.value("t15-initializing-only", 15, r, gkey("sg"), 0, statePartitionValue(initializing, Json.arr(), Json.arr()));
        }
        tombstone("t15-tombstone", 15, r, gkey("sg"), helpers("newShareGroupStatePartitionMetadataTombstoneRecord"), "sg");
    }

    private ObjectNode statePartitionValue(ArrayNode initializing, ArrayNode initialized, ArrayNode deleting) {
        ObjectNode v = Json.obj();
        if (initializing15) {
            v.set("initializingTopics", initializing);
        }
        v.set("initializedTopics", initialized);
        v.set("deletingTopics", deleting);
        return v;
    }

    /** Unusual group and member ids on the share-group keys. */
    private void groupIdVariants() {
        String[][] groups = {
            {"empty", ""}, {"1char", "g"}, {"len300", "share-group-".repeat(25)},
            {"unicode", "grüppe-日本-😀"}, {"colon", "group:with:colons"},
        };
        for (String[] g : groups) {
            ObjectNode v = Json.obj("epoch", 3);
            if (metadataHash11) {
                v.put("metadataHash", 99L);
            }
            w.value("group-" + g[0] + "-t11", 11, "ShareGroupMetadata", gkey(g[1]), 0, v);
            w.value("group-" + g[0] + "-t10", 10, "ShareGroupMemberMetadata", mkey(g[1], g[1].isEmpty() ? "" : MEMBER), 0,
                Json.obj("rackId", null, "clientId", "c", "clientHost", "h", "subscribedTopicNames", Json.arr("t")));
            w.tombstone("group-" + g[0] + "-t14-tombstone", 14, "ShareGroupCurrentMemberAssignment", mkey(g[1], MEMBER));
        }
    }

    // ---------------------------------------------------------------- other types (classification only)

    private void otherTypes() {
        // 0: legacy offset commit (key version 0). 4.1+ has LegacyOffsetCommitKey/Value; in 4.0 the same
        // bytes are OffsetCommitKey read at key version 0 and OffsetCommitValue at value version 0.
        String legacy = legacyOffsetCommitClass ? "LegacyOffsetCommit" : "OffsetCommit";
        w.value("t0-legacy-offset-commit", 0, legacy, Json.obj("group", "classic-group", "topic", "orders", "partition", 0), 0,
            Json.obj("offset", 100L, "metadata", "", "commitTimestamp", T0));
        w.tombstone("t0-legacy-offset-commit-tombstone", 0, legacy,
            Json.obj("group", "classic-group", "topic", "orders", "partition", 0));

        // 1: offset commit, value versions 0-4.
        ObjectNode ocKey = Json.obj("group", "consumer-group", "topic", "orders", "partition", 3);
        w.value("t1-offset-commit-v0", 1, "OffsetCommit", ocKey, 0,
            Json.obj("offset", 42L, "metadata", "meta", "commitTimestamp", T0));
        w.value("t1-offset-commit-v1", 1, "OffsetCommit", ocKey, 1,
            Json.obj("offset", 42L, "metadata", "", "commitTimestamp", T0, "expireTimestamp", T0 + 86_400_000L));
        w.value("t1-offset-commit-v2", 1, "OffsetCommit", ocKey, 2,
            Json.obj("offset", 42L, "metadata", "", "commitTimestamp", T0));
        w.value("t1-offset-commit-v3", 1, "OffsetCommit", ocKey, 3,
            Json.obj("offset", 42L, "leaderEpoch", 5, "metadata", "", "commitTimestamp", T0));
        w.value("t1-offset-commit-v3-no-leader-epoch", 1, "OffsetCommit", ocKey, 3,
            Json.obj("offset", 0L, "leaderEpoch", -1, "metadata", "", "commitTimestamp", 0L));
        w.value("t1-offset-commit-v4", 1, "OffsetCommit", ocKey, 4,
            Json.obj("offset", Long.MAX_VALUE, "leaderEpoch", 5, "metadata", "mëta-日本", "commitTimestamp", T0));
        if (offsetCommitTopicId) {
            w.value("t1-offset-commit-v4-topic-id", 1, "OffsetCommit", ocKey, 4,
                Json.obj("offset", 42L, "leaderEpoch", 5, "metadata", "", "commitTimestamp", T0, "topicId", TOPIC_A));
        }
        w.tombstone("t1-offset-commit-tombstone", 1, "OffsetCommit", ocKey);

        // 2: classic group metadata, value versions 0-4.
        for (int v = 0; v <= 4; v++) {
            w.value("t2-group-metadata-v" + v, 2, "GroupMetadata", Json.obj("group", "classic-group"), v, groupMetadataValue(v));
        }
        w.value("t2-group-metadata-v4-empty", 2, "GroupMetadata", Json.obj("group", "classic-group"), 4, Json.obj(
            "protocolType", "", "generation", 0, "protocol", null, "leader", null, "currentStateTimestamp", -1L,
            "members", Json.arr()));
        w.tombstone("t2-group-metadata-tombstone", 2, "GroupMetadata", Json.obj("group", "classic-group"));

        // 3: consumer group metadata (MetadataHash tagged, tag 0, default 0, in 4.1+).
        w.value("t3-consumer-group-metadata", 3, "ConsumerGroupMetadata", gkey("cg"), 0, Json.obj("epoch", 12));
        if (consumerMetadataHash) {
            w.value("t3-consumer-group-metadata-hash", 3, "ConsumerGroupMetadata", gkey("cg"), 0,
                Json.obj("epoch", 12, "metadataHash", 0x0102030405060708L));
        }
        w.tombstone("t3-consumer-group-metadata-tombstone", 3, "ConsumerGroupMetadata", gkey("cg"));

        // 5: consumer group member metadata.
        w.value("t5-consumer-member-nulls", 5, "ConsumerGroupMemberMetadata", mkey("cg", MEMBER), 0, Json.obj(
            "instanceId", null, "rackId", null, "clientId", "client", "clientHost", "/127.0.0.1",
            "subscribedTopicNames", Json.arr("orders"), "subscribedTopicRegex", null, "rebalanceTimeoutMs", 30000,
            "serverAssignor", null));
        w.value("t5-consumer-member-classic", 5, "ConsumerGroupMemberMetadata", mkey("cg", MEMBER), 0, Json.obj(
            "instanceId", "instance-1", "rackId", "rack", "clientId", "client", "clientHost", "/127.0.0.1",
            "subscribedTopicNames", Json.arr(), "subscribedTopicRegex", "ord.*", "rebalanceTimeoutMs", -1,
            "serverAssignor", "uniform", "classicMemberMetadata", Json.obj("sessionTimeoutMs", 45000,
                "supportedProtocols", Json.arr(Json.obj("name", "range", "metadata", new byte[] {0, 1, 2, (byte) 0xff})))));
        w.tombstone("t5-consumer-member-tombstone", 5, "ConsumerGroupMemberMetadata", mkey("cg", MEMBER));

        // 6: consumer group target assignment metadata (AssignmentTimestamp tagged in 4.3+).
        w.value("t6-consumer-target-assignment-metadata", 6, "ConsumerGroupTargetAssignmentMetadata", gkey("cg"), 0,
            Json.obj("assignmentEpoch", 12));

        // 16: consumer group regular expression.
        w.value("t16-regex", 16, "ConsumerGroupRegularExpression",
            Json.obj("groupId", "cg", "regularExpression", "ord.*"), 0,
            Json.obj("topics", Json.arr("orders", "ordinals"), "version", 3L, "timestamp", T0));
        w.tombstone("t16-regex-tombstone", 16, "ConsumerGroupRegularExpression",
            Json.obj("groupId", "cg", "regularExpression", "ord.*"));

        // 17, 20: streams groups (4.1+).
        if (streams) {
            w.value("t17-streams-group-metadata", 17, "StreamsGroupMetadata", gkey("streams-app"), 0,
                Json.obj("epoch", 4, "metadataHash", 77L));
            w.tombstone("t17-streams-group-metadata-tombstone", 17, "StreamsGroupMetadata", gkey("streams-app"));
            w.value("t20-streams-target-assignment-metadata", 20, "StreamsGroupTargetAssignmentMetadata",
                gkey("streams-app"), 0, Json.obj("assignmentEpoch", 4));
        }
    }

    private static ObjectNode groupMetadataValue(int version) {
        ObjectNode member = Json.obj("memberId", "consumer-1-" + MEMBER);
        if (version >= 3) {
            member.set("groupInstanceId", Json.node(version == 3 ? null : "instance-1"));
        }
        member.put("clientId", "consumer-1");
        member.put("clientHost", "/127.0.0.1");
        if (version >= 1) {
            member.put("rebalanceTimeout", 300000);
        }
        member.put("sessionTimeout", 45000);
        member.set("subscription", Json.node("subscription".getBytes(StandardCharsets.UTF_8)));
        member.set("assignment", Json.node(new byte[] {0, 0, 0, 1}));
        ObjectNode v = Json.obj("protocolType", "consumer", "generation", 7, "protocol", "range",
            "leader", "consumer-1-" + MEMBER);
        if (version >= 2) {
            v.put("currentStateTimestamp", T0);
        }
        v.set("members", Json.arr(member));
        return v;
    }

    // ---------------------------------------------------------------- random share-group records

    private void randomShareRecords(int n) {
        Gen g = new Gen(0xC0_FF5E75L);
        List<Integer> types = new ArrayList<>(List.of(10, 11, 12, 13, 14, 15));
        if (has9) {
            types.add(9);
        }
        String[] groupPool = new String[8];
        for (int i = 0; i < groupPool.length; i++) {
            groupPool[i] = g.string(30);
        }
        for (int i = 0; i < n; i++) {
            int type = types.get(g.below(types.size()));
            String group = g.below(5) == 0 ? g.string(50) : groupPool[g.below(groupPool.length)];
            String member = g.below(4) == 0 ? g.string(30) : g.uuid().toString();
            String name = String.format("random-%03d-t%d", i, type);
            boolean tombstone = g.below(7) == 0;
            String record;
            ObjectNode key;
            ObjectNode value;
            switch (type) {
                case 9:
                    record = "ShareGroupPartitionMetadata";
                    key = gkey(group);
                    ArrayNode topics = Json.F.arrayNode();
                    for (int t = g.below(4); t > 0; t--) {
                        ArrayNode pm = Json.F.arrayNode();
                        for (int p = g.below(4); p > 0; p--) {
                            ArrayNode racks = Json.F.arrayNode();
                            for (int k = g.below(3); k > 0; k--) {
                                racks.add(g.string(8));
                            }
                            pm.add(Json.obj("partition", g.int32(), "racks", racks));
                        }
                        topics.add(Json.obj("topicId", g.uuid(), "topicName", g.string(20), "numPartitions", g.int32(),
                            "partitionMetadata", pm));
                    }
                    value = Json.obj("topics", topics);
                    break;
                case 10:
                    record = "ShareGroupMemberMetadata";
                    key = mkey(group, member);
                    ArrayNode names = Json.F.arrayNode();
                    for (int t = g.below(5); t > 0; t--) {
                        names.add(g.string(20));
                    }
                    value = Json.obj("rackId", g.bool() ? null : g.string(10), "clientId", g.string(20),
                        "clientHost", g.string(20), "subscribedTopicNames", names);
                    break;
                case 11:
                    record = "ShareGroupMetadata";
                    key = gkey(group);
                    value = Json.obj("epoch", g.int32());
                    if (metadataHash11) {
                        value.put("metadataHash", g.int64());
                    }
                    break;
                case 12:
                    record = "ShareGroupTargetAssignmentMetadata";
                    key = gkey(group);
                    value = Json.obj("assignmentEpoch", g.int32());
                    if (timestamp12 && g.bool()) {
                        value.put("assignmentTimestamp", g.int64());
                    }
                    break;
                case 13:
                    record = "ShareGroupTargetAssignmentMember";
                    key = mkey(group, member);
                    value = Json.obj("topicPartitions", randomTopicPartitions(g));
                    break;
                case 14:
                    record = "ShareGroupCurrentMemberAssignment";
                    key = mkey(group, member);
                    value = Json.obj("memberEpoch", g.int32(), "previousMemberEpoch", g.int32(), "state", g.int8(),
                        "assignedPartitions", randomTopicPartitions(g));
                    break;
                case 15:
                    record = "ShareGroupStatePartitionMetadata";
                    key = gkey(group);
                    ArrayNode deleting = Json.F.arrayNode();
                    for (int t = g.below(3); t > 0; t--) {
                        deleting.add(Json.obj("topicId", g.uuid(), "topicName", g.string(20)));
                    }
                    value = statePartitionValue(randomTopicPartitionsInfo(g), randomTopicPartitionsInfo(g), deleting);
                    break;
                default:
                    throw new IllegalStateException("type " + type);
            }
            if (tombstone) {
                w.tombstone(name + "-tombstone", type, record, key);
            } else {
                w.value(name, type, record, key, 0, value);
            }
        }
    }

    private static ArrayNode randomTopicPartitions(Gen g) {
        ArrayNode a = Json.F.arrayNode();
        for (int t = g.below(4); t > 0; t--) {
            a.add(Json.obj("topicId", g.uuid(), "partitions", randomInts(g)));
        }
        return a;
    }

    private static ArrayNode randomTopicPartitionsInfo(Gen g) {
        ArrayNode a = Json.F.arrayNode();
        for (int t = g.below(3); t > 0; t--) {
            a.add(Json.obj("topicId", g.uuid(), "topicName", g.string(20), "partitions", randomInts(g)));
        }
        return a;
    }

    private static int[] randomInts(Gen g) {
        int[] out = new int[g.below(8)];
        for (int i = 0; i < out.length; i++) {
            out[i] = g.bool() ? g.below(64) : g.int32();
        }
        return out;
    }

    // ---------------------------------------------------------------- helpers

    private static ObjectNode gkey(String groupId) {
        return Json.obj("groupId", groupId);
    }

    private static ObjectNode mkey(String groupId, String memberId) {
        return Json.obj("groupId", groupId, "memberId", memberId);
    }

    private static int[] range(int n) {
        int[] out = new int[n];
        for (int i = 0; i < n; i++) {
            out[i] = i;
        }
        return out;
    }

    /**
     * Writes a tombstone and cross-checks it against the first of the named
     * GroupCoordinatorRecordHelpers factories this release has (all take the same String args;
     * names changed between releases).
     */
    private void tombstone(String caseName, int type, String record, ObjectNode key, String[] helperNames, String... args) {
        CoordinatorRecord rec = w.tombstone(caseName, type, record, key);
        Class<?>[] params = new Class<?>[args.length];
        Arrays.fill(params, String.class);
        for (String name : helperNames) {
            Method m = Compat.optionalMethod(GroupCoordinatorRecordHelpers.class, name, params);
            if (m != null) {
                w.expectSameBytesAsKafkaHelper(caseName, rec, (CoordinatorRecord) Compat.invoke(m, null, (Object[]) args));
                return;
            }
        }
    }

    private static String[] helpers(String... names) {
        return names;
    }
}
