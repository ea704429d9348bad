package sharestate.harness;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.share.ShareCoordinatorRecordHelpers;
import org.apache.kafka.coordinator.share.ShareCoordinatorRecordSerde;
import org.apache.kafka.coordinator.share.ShareGroupOffset;
import org.apache.kafka.coordinator.share.generated.ShareSnapshotValue;
import org.apache.kafka.coordinator.share.generated.ShareUpdateValue;

import java.lang.reflect.Method;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * Golden records for {@code __share_group_state}: record types 0 (ShareSnapshot) and
 * 1 (ShareUpdate), serialized by {@link ShareCoordinatorRecordSerde}. Every snapshot, update and
 * tombstone is also rebuilt with Kafka's {@link ShareCoordinatorRecordHelpers} (from
 * {@code ShareGroupOffset.fromRecord(value)}) and must give identical bytes.
 */
final class ShareStateGolden {
    static final String PKG = "org.apache.kafka.coordinator.share.generated";
    static final int SNAPSHOT = 0;
    static final int UPDATE = 1;
    static final long T0 = 1735689600000L; // 2025-01-01T00:00:00Z, fixed: no wall clock

    record Key(String groupId, Uuid topicId, int partition) { }

    record Batch(long firstOffset, long lastOffset, int deliveryState, int deliveryCount) { }

    /** ShareSnapshotValue fields (timestamps 4.1+, deliveryCompleteCount 4.2+; null = leave at default). */
    static final class Snapshot {
        int snapshotEpoch = 0;
        int stateEpoch = 0;
        int leaderEpoch = 0;
        long startOffset = 0;
        long createTimestamp = T0;
        long writeTimestamp = T0;
        Integer deliveryCompleteCount = null;
        List<Batch> batches = List.of(new Batch(0, 9, 2, 1));
    }

    /** ShareUpdateValue fields (deliveryCompleteCount 4.2+; null = leave at default). */
    static final class Update {
        int snapshotEpoch = 0;
        int leaderEpoch = 0;
        long startOffset = -1;
        Integer deliveryCompleteCount = null;
        List<Batch> batches = List.of(new Batch(0, 9, 2, 1));
    }

    private final GoldenWriter w;
    /** 4.0: SnapshotEpoch is uint16; 4.1+: int32. */
    private final boolean snapshotEpochInt32 = Schemas.fieldType("ShareSnapshotValue", "SnapshotEpoch").equals("int32");
    /** 4.1+: ShareSnapshotValue has CreateTimestamp/WriteTimestamp. */
    private final boolean timestamps = Schemas.hasField("ShareSnapshotValue", "CreateTimestamp");
    /** 4.2+: DeliveryCompleteCount (a tagged field) in both value types. */
    private final boolean dcc = Schemas.hasField("ShareSnapshotValue", "DeliveryCompleteCount")
        && Schemas.hasField("ShareUpdateValue", "DeliveryCompleteCount");
    /** 4.0: newShareSnapshotUpdateRecord; 4.1+: newShareUpdateRecord. */
    private final Method updateHelper;
    /** 4.1+ only: newShareStateTombstoneRecord. */
    private final Method tombstoneHelper;

    ShareStateGolden(Path file) {
        this.w = new GoldenWriter(file, new ShareCoordinatorRecordSerde(), PKG);
        Class<?>[] params = {String.class, Uuid.class, int.class, ShareGroupOffset.class};
        Method m = Compat.optionalMethod(ShareCoordinatorRecordHelpers.class, "newShareUpdateRecord", params);
        this.updateHelper = m != null ? m
            : Compat.method(ShareCoordinatorRecordHelpers.class, "newShareSnapshotUpdateRecord", params);
        this.tombstoneHelper = Compat.optionalMethod(ShareCoordinatorRecordHelpers.class,
            "newShareStateTombstoneRecord", String.class, Uuid.class, int.class);
    }

    String generate() {
        try (GoldenWriter writer = w) {
            specExamples();
            keyCases();
            batchCountCases();
            epochAndOffsetCases();
            batchFieldCases();
            if (timestamps) {
                timestampCases();
            }
            if (dcc) {
                deliveryCompleteCountCases();
            }
            tombstoneCases();
            randomCases(200);
            return writer.summary();
        }
    }

    // ---------------------------------------------------------------- fixed cases

    private static final Key K_SPEC = new Key("g1", Uuid.fromString("Uj5wn_FqTXirEASvVZRY1w"), 0);
    private static final Key K = new Key("share-group-1", Uuid.fromString("Uj5wn_FqTXirEASvVZRY1w"), 3);

    /** The hand-derived examples of the spec (section 1.4), produced by Kafka itself. */
    private void specExamples() {
        List<Batch> batch = List.of(new Batch(10, 14, 2, 1));
        update("spec-example-update", K_SPEC, u -> {
            u.snapshotEpoch = 0; u.leaderEpoch = 1; u.startOffset = 10; u.batches = batch;
        });
        snapshot("spec-example-snapshot", K_SPEC, s -> {
            s.snapshotEpoch = 3; s.stateEpoch = 1; s.leaderEpoch = 1; s.startOffset = 10; s.batches = batch;
        });
        if (dcc) {
            update("spec-example-update-dcc-5", K_SPEC, u -> {
                u.snapshotEpoch = 0; u.leaderEpoch = 1; u.startOffset = 10; u.batches = batch; u.deliveryCompleteCount = 5;
            });
        }
        tombstone("spec-example-tombstone", K_SPEC);
    }

    private void keyCases() {
        Uuid t = K.topicId();
        String long300 = "long-group-".repeat(28) + "x".repeat(2); // 310 ASCII chars
        String[][] groups = {
            {"empty", ""},
            {"1char", "g"},
            {"len255", "a".repeat(255)},
            {"len256", "b".repeat(256)},
            {"len310", long300},
            {"unicode", "grüppe-日本-😀"},
            {"unicode-long", "日本語-グループ-😀".repeat(25)}, // > 255 UTF-8 bytes, fewer chars
            {"colon", "group:with:colons"},
            {"colon-only", ":"},
            {"spaces-and-quotes", "a group \"quoted\" \\ back/slash"},
        };
        for (String[] g : groups) {
            Key k = new Key(g[1], t, 0);
            snapshot("key-group-" + g[0] + "-snapshot", k, s -> { });
            update("key-group-" + g[0] + "-update", k, u -> { });
        }
        Uuid[] topics = {
            Uuid.ZERO_UUID, Uuid.ONE_UUID, new Uuid(-1L, -1L), new Uuid(Long.MIN_VALUE, 0L),
            new Uuid(0x0123456789abcdefL, 0xfedcba9876543210L),
        };
        String[] topicNames = {"zero", "one", "all-ones", "msb-min", "pattern"};
        for (int i = 0; i < topics.length; i++) {
            snapshot("key-topic-" + topicNames[i], new Key("g", topics[i], 0), s -> { });
        }
        Gen gen = new Gen(0x70_1C_1DL);
        for (int i = 0; i < 5; i++) {
            Key k = new Key("g", gen.uuid(), i);
            snapshot("key-topic-random-" + i + "-snapshot", k, s -> { });
            update("key-topic-random-" + i + "-update", k, u -> { });
        }
        int[] partitions = {0, 1, 49, 255, 256, 65536, Integer.MAX_VALUE, -1, Integer.MIN_VALUE};
        for (int p : partitions) {
            snapshot("key-partition-" + p, new Key("g", t, p), s -> { });
        }
    }

    private void batchCountCases() {
        // 126/127 batches: compact array length uvarint(n+1) goes from 1 to 2 bytes; 150 and 600 also need 2 bytes.
        int[] counts = {0, 1, 2, 3, 126, 127, 150, 600};
        for (int n : counts) {
            List<Batch> b = manyBatches(n);
            snapshot("snapshot-batches-" + n, K, s -> s.batches = b);
            update("update-batches-" + n, K, u -> u.batches = b);
        }
    }

    private void epochAndOffsetCases() {
        long[] startOffsets = {-1, 0, 1, 10, (1L << 31), Long.MAX_VALUE - 1, Long.MAX_VALUE};
        for (long so : startOffsets) {
            snapshot("snapshot-start-offset-" + so, K, s -> { s.startOffset = so; s.batches = batchesFrom(Math.max(so, 0)); });
            update("update-start-offset-" + so, K, u -> { u.startOffset = so; u.batches = batchesFrom(Math.max(so, 0)); });
        }
        int[] leaderEpochs = {-1, 0, 1, Integer.MAX_VALUE};
        for (int le : leaderEpochs) {
            snapshot("snapshot-leader-epoch-" + le, K, s -> s.leaderEpoch = le);
            update("update-leader-epoch-" + le, K, u -> u.leaderEpoch = le);
        }
        int[] stateEpochs = {-1, 0, 1, Integer.MAX_VALUE};
        for (int se : stateEpochs) {
            snapshot("snapshot-state-epoch-" + se, K, s -> s.stateEpoch = se);
        }
        List<Integer> snapshotEpochs = new ArrayList<>(List.of(0, 1, 255, 256, 32767, 32768, 65535));
        if (snapshotEpochInt32) {
            snapshotEpochs.addAll(List.of(65536, Integer.MAX_VALUE, -1, Integer.MIN_VALUE));
        }
        for (int se : snapshotEpochs) {
            snapshot("snapshot-snapshot-epoch-" + se, K, s -> s.snapshotEpoch = se);
            update("update-snapshot-epoch-" + se, K, u -> u.snapshotEpoch = se);
        }
    }

    private void batchFieldCases() {
        int[] states = {0, 1, 2, 4};
        for (int st : states) {
            List<Batch> b = List.of(new Batch(100, 199, st, 1));
            snapshot("snapshot-delivery-state-" + st, K, s -> { s.startOffset = 100; s.batches = b; });
            update("update-delivery-state-" + st, K, u -> { u.startOffset = 100; u.batches = b; });
        }
        List<Batch> mixed = List.of(new Batch(100, 104, 0, 0), new Batch(105, 105, 1, 1),
            new Batch(106, 110, 2, 2), new Batch(111, 111, 4, 5));
        snapshot("snapshot-delivery-states-mixed", K, s -> { s.startOffset = 100; s.batches = mixed; });
        update("update-delivery-states-mixed", K, u -> { u.startOffset = 100; u.batches = mixed; });
        // int8 DeliveryState edges (3 = ARCHIVING in newer releases; the serializer accepts any int8).
        List<Batch> stateEdges = List.of(new Batch(0, 0, 3, 1), new Batch(1, 1, 127, 1), new Batch(2, 2, -128, 1),
            new Batch(3, 3, -1, 1));
        snapshot("snapshot-delivery-state-int8-edges", K, s -> s.batches = stateEdges);
        update("update-delivery-state-int8-edges", K, u -> u.batches = stateEdges);

        int[] counts = {0, 1, 5, 127, 128, 255, 256, Short.MAX_VALUE};
        for (int c : counts) {
            List<Batch> b = List.of(new Batch(100, 100, 4, c));
            snapshot("snapshot-delivery-count-" + c, K, s -> { s.startOffset = 100; s.batches = b; });
            update("update-delivery-count-" + c, K, u -> { u.startOffset = 100; u.batches = b; });
        }
        List<Batch> countEdges = List.of(new Batch(0, 0, 0, -1), new Batch(1, 1, 0, Short.MIN_VALUE));
        snapshot("snapshot-delivery-count-int16-negative", K, s -> s.batches = countEdges);

        List<Batch> bigOffsets = List.of(new Batch(Long.MAX_VALUE - 10, Long.MAX_VALUE - 5, 0, 1),
            new Batch(Long.MAX_VALUE - 4, Long.MAX_VALUE, 2, Short.MAX_VALUE));
        snapshot("snapshot-batch-offsets-near-max", K, s -> { s.startOffset = Long.MAX_VALUE - 10; s.batches = bigOffsets; });
        update("update-batch-offsets-near-max", K, u -> { u.startOffset = Long.MAX_VALUE - 10; u.batches = bigOffsets; });
        List<Batch> single = List.of(new Batch(7, 7, 2, 1));
        snapshot("snapshot-batch-single-offset", K, s -> { s.startOffset = 7; s.batches = single; });
        List<Batch> weird = List.of(new Batch(-5, -1, 0, 0), new Batch(Long.MIN_VALUE, Long.MIN_VALUE, 0, 0),
            new Batch(20, 10, 2, 1));
        snapshot("snapshot-batch-offsets-unusual", K, s -> s.batches = weird); // negative / reversed: serializer does not care
    }

    private void timestampCases() {
        snapshot("snapshot-timestamps-equal", K, s -> { s.createTimestamp = T0; s.writeTimestamp = T0; });
        snapshot("snapshot-timestamps-different", K, s -> { s.createTimestamp = T0; s.writeTimestamp = T0 + 123_456; });
        snapshot("snapshot-timestamps-zero", K, s -> { s.createTimestamp = 0; s.writeTimestamp = 0; });
        snapshot("snapshot-timestamps-create-zero", K, s -> { s.createTimestamp = 0; s.writeTimestamp = T0; });
        snapshot("snapshot-timestamps-minus-one", K, s -> { s.createTimestamp = -1; s.writeTimestamp = -1; });
        snapshot("snapshot-timestamps-max", K, s -> { s.createTimestamp = Long.MAX_VALUE; s.writeTimestamp = Long.MAX_VALUE; });
        snapshot("snapshot-timestamps-write-before-create", K, s -> { s.createTimestamp = T0 + 1; s.writeTimestamp = T0; });
    }

    private void deliveryCompleteCountCases() {
        // null: field left unset (generated default -1). Explicit -1 must give identical bytes.
        Integer[] values = {null, -1, 0, 1, 5, 127, 128, 65536, Integer.MAX_VALUE, -2, Integer.MIN_VALUE};
        for (Integer d : values) {
            String n = d == null ? "unset" : String.valueOf(d);
            snapshot("snapshot-dcc-" + n, K, s -> s.deliveryCompleteCount = d);
            update("update-dcc-" + n, K, u -> u.deliveryCompleteCount = d);
        }
        snapshot("snapshot-dcc-5-no-batches", K, s -> { s.deliveryCompleteCount = 5; s.batches = List.of(); });
        snapshot("snapshot-dcc-large-600-batches", K, s -> { s.deliveryCompleteCount = 1_000_000; s.batches = manyBatches(600); });
        update("update-dcc-0-start-offset-unchanged", K, u -> { u.deliveryCompleteCount = 0; u.startOffset = -1; });
    }

    private void tombstoneCases() {
        // Kafka 4.1+ writes these (ShareCoordinatorRecordHelpers.newShareStateTombstoneRecord); 4.0 never
        // writes them, but the key bytes are the same so they are included for every release.
        tombstone("tombstone-basic", K);
        tombstone("tombstone-group-empty", new Key("", K.topicId(), 0));
        tombstone("tombstone-group-unicode", new Key("grüppe-日本-😀", K.topicId(), 7));
        tombstone("tombstone-group-len310", new Key("t".repeat(310), Uuid.ONE_UUID, Integer.MAX_VALUE));
        tombstone("tombstone-topic-zero", new Key("g", Uuid.ZERO_UUID, 0));
    }

    private void randomCases(int n) {
        Gen g = new Gen(0x5A4E_57A7EL);
        Key[] keyPool = new Key[20];
        for (int i = 0; i < keyPool.length; i++) {
            keyPool[i] = new Key(g.string(40), g.uuid(), g.bool() ? g.below(64) : g.int32());
        }
        for (int i = 0; i < n; i++) {
            Key k = g.below(4) == 0 ? new Key(g.string(60), g.uuid(), g.int32()) : keyPool[g.below(keyPool.length)];
            List<Batch> batches = randomBatches(g);
            Integer d = dcc && g.bool() ? g.int32() : null;
            String name = String.format("random-%03d", i);
            if (g.below(2) == 0) {
                Snapshot s = new Snapshot();
                s.snapshotEpoch = snapshotEpochInt32 ? g.int32() : g.uint16();
                s.stateEpoch = g.int32();
                s.leaderEpoch = g.int32();
                s.startOffset = g.int64();
                s.createTimestamp = g.int64();
                s.writeTimestamp = g.bool() ? s.createTimestamp : g.int64();
                s.deliveryCompleteCount = d;
                s.batches = batches;
                writeSnapshot(name + "-snapshot", k, s);
            } else {
                Update u = new Update();
                u.snapshotEpoch = snapshotEpochInt32 ? g.int32() : g.uint16();
                u.leaderEpoch = g.int32();
                u.startOffset = g.int64();
                u.deliveryCompleteCount = d;
                u.batches = batches;
                writeUpdate(name + "-update", k, u);
            }
        }
    }

    // ---------------------------------------------------------------- builders

    private void snapshot(String name, Key key, Consumer<Snapshot> customize) {
        Snapshot s = new Snapshot();
        customize.accept(s);
        writeSnapshot(name, key, s);
    }

    private void update(String name, Key key, Consumer<Update> customize) {
        Update u = new Update();
        customize.accept(u);
        writeUpdate(name, key, u);
    }

    private void writeSnapshot(String name, Key key, Snapshot s) {
        ObjectNode v = Json.obj("snapshotEpoch", s.snapshotEpoch, "stateEpoch", s.stateEpoch,
            "leaderEpoch", s.leaderEpoch, "startOffset", s.startOffset);
        if (timestamps) {
            v.put("createTimestamp", s.createTimestamp);
            v.put("writeTimestamp", s.writeTimestamp);
        }
        v.set("stateBatches", batchesJson(s.batches));
        if (s.deliveryCompleteCount != null) {
            requireDcc(name);
            v.put("deliveryCompleteCount", s.deliveryCompleteCount);
        }
        CoordinatorRecord rec = w.value(name, SNAPSHOT, "ShareSnapshot", keyJson(key), 0, v);
        ShareGroupOffset offset = ShareGroupOffset.fromRecord((ShareSnapshotValue) rec.value().message());
        w.expectSameBytesAsKafkaHelper(name, rec,
            ShareCoordinatorRecordHelpers.newShareSnapshotRecord(key.groupId(), key.topicId(), key.partition(), offset));
    }

    private void writeUpdate(String name, Key key, Update u) {
        ObjectNode v = Json.obj("snapshotEpoch", u.snapshotEpoch, "leaderEpoch", u.leaderEpoch,
            "startOffset", u.startOffset, "stateBatches", batchesJson(u.batches));
        if (u.deliveryCompleteCount != null) {
            requireDcc(name);
            v.put("deliveryCompleteCount", u.deliveryCompleteCount);
        }
        CoordinatorRecord rec = w.value(name, UPDATE, "ShareUpdate", keyJson(key), 0, v);
        ShareGroupOffset offset = ShareGroupOffset.fromRecord((ShareUpdateValue) rec.value().message());
        w.expectSameBytesAsKafkaHelper(name, rec, (CoordinatorRecord) Compat.invoke(updateHelper, null,
            key.groupId(), key.topicId(), key.partition(), offset));
    }

    private void tombstone(String name, Key key) {
        CoordinatorRecord rec = w.tombstone(name, SNAPSHOT, "ShareSnapshot", keyJson(key));
        if (tombstoneHelper != null) {
            w.expectSameBytesAsKafkaHelper(name, rec, (CoordinatorRecord) Compat.invoke(tombstoneHelper, null,
                key.groupId(), key.topicId(), key.partition()));
        }
    }

    private void requireDcc(String name) {
        if (!dcc) {
            throw new IllegalStateException(name + ": DeliveryCompleteCount does not exist in this release");
        }
    }

    private static ObjectNode keyJson(Key k) {
        return Json.obj("groupId", k.groupId(), "topicId", k.topicId(), "partition", k.partition());
    }

    private static ArrayNode batchesJson(List<Batch> batches) {
        ArrayNode a = Json.F.arrayNode();
        for (Batch b : batches) {
            a.add(Json.obj("firstOffset", b.firstOffset(), "lastOffset", b.lastOffset(),
                "deliveryState", b.deliveryState(), "deliveryCount", b.deliveryCount()));
        }
        return a;
    }

    /** n contiguous-ish batches starting at offset 1000, cycling through the delivery states. */
    private static List<Batch> manyBatches(int n) {
        int[] states = {0, 1, 2, 4};
        List<Batch> out = new ArrayList<>(n);
        long next = 1000;
        for (int i = 0; i < n; i++) {
            long last = next + (i % 5);
            out.add(new Batch(next, last, states[i % 4], i % 7));
            next = last + 1 + (i % 3 == 0 ? 2 : 0); // leave some gaps
        }
        return out;
    }

    private static List<Batch> batchesFrom(long start) {
        long end = start > Long.MAX_VALUE - 10 ? Long.MAX_VALUE : start + 9;
        return List.of(new Batch(start, end, 2, 1));
    }

    private static List<Batch> randomBatches(Gen g) {
        int n = g.below(10) == 0 ? g.below(40) : g.below(6);
        List<Batch> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(new Batch(g.int64(), g.int64(), g.int8(), g.int16()));
        }
        return out;
    }
}
