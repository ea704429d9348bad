package sharestate.harness;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.ReadShareGroupStateResponseData;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.share.ShareCoordinatorRecordSerde;
import org.apache.kafka.coordinator.share.ShareGroupOffset;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;

/**
 * One sequence of the replay corpus: the log of one {@code __share_group_state} partition.
 *
 * <p>A seeded model of share-partition leaders (fetch/acquire, accept/release/reject, lock timeouts,
 * the delivery-count limit, SPSO moves, leader changes, state reloads, alter offsets, delete and
 * re-create, topic deletion, idle periods) sends requests to a <em>writer</em>
 * {@link org.apache.kafka.coordinator.share.ShareCoordinatorShard}. Every record that Kafka's
 * request handler returns is replayed into that writer (as the coordinator runtime does), serialized
 * with {@link ShareCoordinatorRecordSerde}, deserialized again and replayed into a separate fresh
 * <em>reader</em> shard (as the coordinator does when it loads the partition). After each record the
 * reader's state of every key is the expected answer.
 */
final class CorpusSequence {
    static final byte AVAILABLE = 0;
    static final byte ACQUIRED = 1;
    static final byte ACKNOWLEDGED = 2;
    static final byte ARCHIVED = 4;
    /** 2026-01-01T00:00:00Z: the fixed start of the simulated clock (no wall clock is read). */
    static final long T0 = 1767225600000L;
    /** 4.1+: initializeState, deleteState, snapshotColdPartitions, maybeCleanupShareState exist. */
    static final boolean V41 = KafkaShard.INITIALIZE != null;

    private static final int[] RPS_VALUES = {0, 1, 2, 5, 10, 50, 500};
    private static final int[] RPS_WEIGHTS = {12, 15, 5, 20, 8, 15, 25};
    private static final String[] GROUP_NAMES = {
        "orders-processor", "payments", "share-group-1", "audit.sink", "g", "emails_v2", "billing-workers",
        "analytics:share", "fulfilment", "notifications"
    };

    private final String release;
    private final int index;
    private final Random rnd;
    private final CorpusStats stats;
    private final ShareCoordinatorRecordSerde serde = new ShareCoordinatorRecordSerde();

    // Sequence parameters.
    private String profile;
    private int recordsPerSnapshot;
    private int deliveryLimit;
    private int target;
    private long baseOffset;
    private int coldIntervalMs;
    private int maxInFlight;
    private int maxFetch;
    private int maxProducerBatch;
    private double chaos;
    private double idleGapProb;
    private double fragmentation;
    private double holdProb;
    /** Scales alter-offsets and delete; 0 for "quiet" long sequences (long runs of updates without snapshots). */
    private double adminRate;

    private final List<KeySim> keys = new ArrayList<>();
    private ManualTime time;
    private KafkaShard writer;
    private KafkaShard reader;
    private long nextColdMs;

    private final List<LogEntry> log = new ArrayList<>();
    private final Map<String, ShareGroupOffset> lastState = new HashMap<>();
    private final ArrayNode recordsJson = Json.F.arrayNode();
    private final Map<String, Integer> opCounts = new TreeMap<>();
    private int maxBatches;

    record LogEntry(long offset, byte[] key, byte[] value, CoordinatorRecord record, int type) { }

    private static final class Rec {
        byte state;
        short count;
        int delivery;

        Rec(byte state, short count, int delivery) {
            this.state = state;
            this.count = count;
            this.delivery = delivery;
        }
    }

    private static final class Delivery {
        final int id;
        final List<long[]> ranges = new ArrayList<>();

        Delivery(int id) {
            this.id = id;
        }
    }

    /** The share-partition leader's view of one key, plus whether the coordinator knows the key. */
    private final class KeySim {
        final KafkaShard.SpKey key;
        final double weight;
        final boolean earliest;
        boolean initialized;
        boolean loaded;
        boolean dead;
        boolean everCreated;
        int stateEpoch;
        int leaderEpoch;
        long logStart;
        long leo;
        long spso;
        long fetchEnd;
        long lastSentStart = Long.MIN_VALUE;
        int nextDeliveryId;
        int holdUntilRecords = -1;
        Delivery held;
        final TreeMap<Long, Rec> inflight = new TreeMap<>();
        final TreeMap<Long, Long> batchBounds = new TreeMap<>();
        final List<Delivery> pending = new ArrayList<>();

        KeySim(KafkaShard.SpKey key, double weight, boolean earliest) {
            this.key = key;
            this.weight = weight;
            this.earliest = earliest;
        }

        int terminalCount() {
            int n = 0;
            for (Rec r : inflight.values()) {
                if (r.state == ACKNOWLEDGED || r.state == ARCHIVED) {
                    n++;
                }
            }
            return n;
        }
    }

    CorpusSequence(String release, int index, long seed, CorpusStats stats) {
        this.release = release;
        this.index = index;
        this.rnd = new Random(seed);
        this.stats = stats;
    }

    // ------------------------------------------------------------------------------------ parameters

    private void chooseParameters() {
        double p = rnd.nextDouble();
        chaos = 0.0;
        idleGapProb = 0.01;
        fragmentation = 0.12;
        holdProb = 0.0;
        adminRate = 1.0;
        maxInFlight = 200 + rnd.nextInt(1801);
        maxFetch = 1 + rnd.nextInt(rnd.nextBoolean() ? 20 : 200);
        maxProducerBatch = 1 + rnd.nextInt(rnd.nextBoolean() ? 5 : 50);
        if (p < 0.25) {
            profile = "tiny";
            target = 5 + rnd.nextInt(16);
        } else if (p < 0.73) {
            profile = "short";
            target = 20 + rnd.nextInt(81);
        } else if (p < 0.89) {
            profile = "medium";
            target = 100 + rnd.nextInt(201);
        } else if (p < 0.93) {
            profile = "idle";
            target = 10 + rnd.nextInt(71);
            idleGapProb = 0.2;
        } else if (p < 0.97) {
            profile = "chaos";
            target = 30 + rnd.nextInt(171);
            chaos = 0.15 + 0.2 * rnd.nextDouble();
        } else if (p < 0.985) {
            profile = "wide";
            target = 200 + rnd.nextInt(201);
            fragmentation = 0.7;
            holdProb = 1.0;
            maxInFlight = 1500 + rnd.nextInt(1000);
            maxFetch = 50 + rnd.nextInt(150);
            maxProducerBatch = 1 + rnd.nextInt(8);
        } else {
            profile = "long";
            target = 1000 + rnd.nextInt(1501);
            adminRate = rnd.nextBoolean() ? 0.0 : 1.0;
        }
        recordsPerSnapshot = weighted(RPS_VALUES, RPS_WEIGHTS);
        if (profile.equals("long") && rnd.nextBoolean()) {
            recordsPerSnapshot = 500; // long runs without snapshots
        }
        double d = rnd.nextDouble();
        deliveryLimit = d < 0.8 ? 5 : d < 0.87 ? 2 : d < 0.94 ? 3 : 10;
        double c = rnd.nextDouble();
        coldIntervalMs = c < 0.7 ? 300_000 : c < 0.9 ? 60_000 : 5_000;
        baseOffset = rnd.nextDouble() < 0.8 ? 0 : 1 + (long) (rnd.nextDouble() * 5_000_000_000L);

        int nKeys;
        double k = rnd.nextDouble();
        if (profile.equals("tiny")) {
            nKeys = k < 0.7 ? 1 : 2;
        } else {
            nKeys = k < 0.35 ? 1 : k < 0.6 ? 2 : k < 0.8 ? 3 : k < 0.9 ? 4 : 5;
        }
        int nGroups = 1 + rnd.nextInt(Math.min(nKeys, 3));
        int nTopics = 1 + rnd.nextInt(Math.min(nKeys, 3));
        List<String> groups = new ArrayList<>();
        for (int g = 0; g < nGroups; g++) {
            String name = GROUP_NAMES[rnd.nextInt(GROUP_NAMES.length)] + "-" + index + "-" + g;
            if (rnd.nextDouble() < 0.04) {
                name = "группа-ß-日本-" + index + "-" + g; // non-ASCII group ids exist too
            }
            groups.add(name);
        }
        List<Uuid> topics = new ArrayList<>();
        Map<Uuid, Integer> partitions = new LinkedHashMap<>();
        for (int t = 0; t < nTopics; t++) {
            Uuid id = new Uuid(rnd.nextLong(), rnd.nextLong());
            topics.add(id);
            partitions.put(id, Math.max(nKeys, 1 + rnd.nextInt(12))); // enough distinct keys
        }
        Set<String> used = new java.util.HashSet<>();
        while (keys.size() < nKeys) {
            String g = groups.get(rnd.nextInt(groups.size()));
            Uuid t = topics.get(rnd.nextInt(topics.size()));
            int part = rnd.nextInt(partitions.get(t));
            KafkaShard.SpKey key = KafkaShard.SpKey.of(g, t, part);
            if (used.add(key.id())) {
                double w = rnd.nextDouble() < 0.25 ? 0.1 + rnd.nextDouble() * 0.3 : 1 + rnd.nextDouble() * 5;
                keys.add(new KeySim(key, w, rnd.nextBoolean()));
            }
        }

        time = new ManualTime(T0 + index * 3_600_000L + rnd.nextInt(1_000_000));
        nextColdMs = time.milliseconds() + coldIntervalMs;
        int statePartition = rnd.nextInt(50);
        writer = new KafkaShard(recordsPerSnapshot, coldIntervalMs, time, statePartition);
        writer.loadMetadata(partitions);
        reader = new KafkaShard(recordsPerSnapshot, coldIntervalMs, new ManualTime(T0), statePartition);
    }

    private int weighted(int[] values, int[] weights) {
        int total = 0;
        for (int w : weights) {
            total += w;
        }
        int r = rnd.nextInt(total);
        for (int i = 0; i < values.length; i++) {
            r -= weights[i];
            if (r < 0) {
                return values[i];
            }
        }
        return values[values.length - 1];
    }

    // ------------------------------------------------------------------------------------ main loop

    ObjectNode run() {
        chooseParameters();
        try {
            int ops = 0;
            int maxOps = target * 80 + 500;
            while (log.size() < target && ops < maxOps) {
                ops++;
                advanceTime(rnd.nextDouble() < idleGapProb ? 60_000 + rnd.nextInt(20 * 60_000) : rnd.nextInt(400));
                step(pickKey());
            }
            if (V41 && rnd.nextDouble() < 0.03) {
                deleteTopic();
            }
            if (profile.equals("idle") && rnd.nextBoolean()) {
                advanceTime(coldIntervalMs + 1000L);
            }
            stats.count("sequences");
            stats.count("profile:" + profile);
            stats.count("records_per_snapshot:" + recordsPerSnapshot);
            stats.max("max_records_in_sequence", log.size());
            return toJson();
        } finally {
            writer.close();
            reader.close();
        }
    }

    private KeySim pickKey() {
        double total = 0;
        for (KeySim k : keys) {
            total += k.weight;
        }
        double r = rnd.nextDouble() * total;
        for (KeySim k : keys) {
            r -= k.weight;
            if (r < 0) {
                return k;
            }
        }
        return keys.get(keys.size() - 1);
    }

    private void step(KeySim k) {
        if (k.dead) {
            return;
        }
        if (!k.initialized) {
            if (k.everCreated && rnd.nextDouble() < 0.9) {
                return; // stays deleted for a while (or for good)
            }
            create(k);
            return;
        }
        if (!k.loaded) {
            load(k, "read-load");
            return;
        }
        if (k.held == null && holdProb > 0 && k.holdUntilRecords < 0 && !k.pending.isEmpty()) {
            // "wide" profile: a stuck consumer holds the oldest delivery, so the SPSO cannot move and
            // the state collects hundreds of batches.
            k.held = k.pending.remove(0);
            k.holdUntilRecords = (int) (target * (0.6 + 0.3 * rnd.nextDouble()));
        }
        if (k.held != null && log.size() >= k.holdUntilRecords) {
            k.pending.add(0, k.held);
            k.held = null;
            acknowledge(k, k.pending.get(0), "timeout");
            return;
        }
        double r = rnd.nextDouble();
        if ((r -= 0.30) < 0) {
            acquire(k);
        } else if ((r -= 0.42) < 0) {
            if (k.pending.isEmpty()) {
                acquire(k);
            } else {
                acknowledge(k, k.pending.get(rnd.nextInt(Math.min(3, k.pending.size()))), "ack");
            }
        } else if ((r -= 0.07) < 0) {
            if (!k.pending.isEmpty()) {
                acknowledge(k, k.pending.get(0), "timeout");
            }
        } else if ((r -= 0.02) < 0) {
            if (!k.pending.isEmpty()) {
                acknowledge(k, k.pending.get(k.pending.size() - 1), "release-decrease");
            }
        } else if ((r -= 0.02) < 0) {
            moveLogStart(k);
        } else if ((r -= 0.015 + chaos * 0.1) < 0) {
            leaderChange(k);
        } else if ((r -= 0.01) < 0) {
            reload(k);
        } else if ((r -= (0.005 + chaos * 0.05) * adminRate) < 0) {
            if (V41) {
                alterOffsets(k);
            }
        } else if ((r -= (0.003 + chaos * 0.03) * adminRate) < 0) {
            if (V41) {
                delete(k);
            }
        } else if ((r -= 0.01) < 0) {
            // a leader replica re-reads with its current epoch: Kafka writes nothing
            read(k, k.leaderEpoch, "read-same-epoch");
        } else {
            acquire(k);
        }
    }

    // ------------------------------------------------------------------------------------ leader actions

    private void acquire(KeySim k) {
        int want = 1 + rnd.nextInt(maxFetch);
        k.leo += rnd.nextInt(2 * maxFetch + 1);
        Delivery d = new Delivery(k.nextDeliveryId++);
        int got = 0;
        for (Map.Entry<Long, Rec> e : k.inflight.entrySet()) {
            if (got >= want) {
                break;
            }
            Rec rec = e.getValue();
            if (rec.state == AVAILABLE) {
                rec.state = ACQUIRED;
                rec.count++;
                rec.delivery = d.id;
                got++;
                addOffset(k, d, e.getKey());
            }
        }
        long limit = Math.min(k.leo, k.spso + maxInFlight);
        while (got < want && k.fetchEnd < limit) {
            long first = k.fetchEnd;
            long last = Math.min(limit - 1, first + rnd.nextInt(maxProducerBatch));
            k.batchBounds.put(first, last);
            for (long o = first; o <= last; o++) {
                k.inflight.put(o, new Rec(ACQUIRED, (short) 1, d.id));
            }
            d.ranges.add(new long[] {first, last});
            got += (int) (last - first + 1);
            k.fetchEnd = last + 1;
        }
        if (got > 0) {
            k.pending.add(d);
            count("acquire");
        }
    }

    /** Adds one re-delivered offset to a delivery, extending its last range inside the same batch. */
    private void addOffset(KeySim k, Delivery d, long offset) {
        Map.Entry<Long, Long> batch = k.batchBounds.floorEntry(offset);
        if (!d.ranges.isEmpty()) {
            long[] last = d.ranges.get(d.ranges.size() - 1);
            Map.Entry<Long, Long> lastBatch = k.batchBounds.floorEntry(last[0]);
            if (last[1] + 1 == offset && Objects.equals(batch, lastBatch)) {
                last[1] = offset;
                return;
            }
        }
        d.ranges.add(new long[] {offset, offset});
    }

    private static final int ACCEPT = 0;
    private static final int RELEASE = 1;
    private static final int REJECT = 2;

    private int randomAckType() {
        double r = rnd.nextDouble();
        return r < 0.8 ? ACCEPT : r < 0.93 ? RELEASE : REJECT;
    }

    /** New (state, count) of an acquired record after an acknowledgement / timeout / release. */
    private long[] transition(Rec rec, String kind, int ackType) {
        switch (kind) {
            case "timeout":
                return new long[] {rec.count >= deliveryLimit ? ARCHIVED : AVAILABLE, rec.count};
            case "release-decrease":
                return new long[] {AVAILABLE, Math.max(0, rec.count - 1)};
            default:
                if (ackType == ACCEPT) {
                    return new long[] {ACKNOWLEDGED, rec.count};
                } else if (ackType == REJECT) {
                    return new long[] {ARCHIVED, rec.count};
                }
                return new long[] {rec.count >= deliveryLimit ? ARCHIVED : AVAILABLE, rec.count};
        }
    }

    private void acknowledge(KeySim k, Delivery d, String kind) {
        k.pending.remove(d);
        List<long[]> ranges = d.ranges;
        if (kind.equals("ack") && ranges.size() > 1 && rnd.nextDouble() < 0.15) {
            // the consumer acknowledges part of what it got now, the rest later
            int m = 1 + rnd.nextInt(ranges.size() - 1);
            Delivery rest = new Delivery(d.id);
            rest.ranges.addAll(ranges.subList(m, ranges.size()));
            k.pending.add(rest);
            ranges = new ArrayList<>(ranges.subList(0, m));
        }
        double mode = rnd.nextDouble();
        boolean perOffset = mode < fragmentation;
        boolean perRange = !perOffset && mode < fragmentation + 0.2;
        int uniform = randomAckType();
        List<long[]> out = new ArrayList<>();
        for (long[] range : ranges) {
            int rangeType = perRange ? randomAckType() : uniform;
            List<long[]> changed = new ArrayList<>();
            for (long o = range[0]; o <= range[1]; o++) {
                Rec rec = k.inflight.get(o);
                if (rec == null || rec.state != ACQUIRED || rec.delivery != d.id) {
                    continue; // archived by a log-start move, or taken over after a reload
                }
                long[] sc = transition(rec, kind, perOffset ? randomAckType() : rangeType);
                rec.state = (byte) sc[0];
                rec.count = (short) sc[1];
                changed.add(new long[] {o, o, sc[0], sc[1]});
            }
            if (changed.isEmpty()) {
                continue;
            }
            boolean same = changed.size() == range[1] - range[0] + 1;
            for (long[] c : changed) {
                same &= c[2] == changed.get(0)[2] && c[3] == changed.get(0)[3];
            }
            if (same) {
                out.add(new long[] {range[0], range[1], changed.get(0)[2], changed.get(0)[3]});
            } else {
                out.addAll(changed); // Kafka sends per-offset batches when a batch's records differ
            }
        }
        if (out.isEmpty()) {
            return;
        }
        long spsoBefore = k.spso;
        int dccBefore = k.terminalCount();
        advanceSpso(k);
        // The leader sends the SPSO it has when it sends the write; it moves past finished records
        // only after the write completes, so usually the next write carries the move.
        boolean afterMove = rnd.nextDouble() < 0.3;
        sendWrite(k, afterMove ? k.spso : spsoBefore, afterMove ? k.terminalCount() : dccBefore, out, kind);
    }

    private void advanceSpso(KeySim k) {
        while (!k.inflight.isEmpty()) {
            Map.Entry<Long, Rec> e = k.inflight.firstEntry();
            if (e.getValue().state != ACKNOWLEDGED && e.getValue().state != ARCHIVED) {
                break;
            }
            k.inflight.pollFirstEntry();
            k.spso = e.getKey() + 1;
        }
        if (k.inflight.isEmpty()) {
            k.spso = Math.max(k.spso, k.fetchEnd);
        }
        k.batchBounds.headMap(k.spso).entrySet().removeIf(b -> b.getValue() < k.spso);
    }

    private void moveLogStart(KeySim k) {
        long newStart = k.spso + 1 + rnd.nextInt((int) Math.min(400, k.fetchEnd - k.spso + 50));
        k.logStart = newStart;
        k.leo = Math.max(k.leo, newStart);
        k.inflight.headMap(newStart).clear();
        k.fetchEnd = Math.max(k.fetchEnd, newStart);
        k.spso = newStart;
        for (Iterator<Delivery> it = k.pending.iterator(); it.hasNext(); ) {
            Delivery d = it.next();
            d.ranges.removeIf(r -> r[1] < newStart);
            for (long[] r : d.ranges) {
                r[0] = Math.max(r[0], newStart);
            }
            if (d.ranges.isEmpty()) {
                it.remove();
            }
        }
        advanceSpso(k);
        sendWrite(k, k.spso, k.terminalCount(), List.of(), "log-start-moved");
    }

    private void leaderChange(KeySim k) {
        int oldEpoch = k.leaderEpoch;
        k.leaderEpoch += 1 + (rnd.nextDouble() < 0.2 ? rnd.nextInt(3) : 0);
        Outcome o = read(k, k.leaderEpoch, "read-new-leader-epoch");
        if (!k.pending.isEmpty() && rnd.nextDouble() < 0.3) {
            // the old leader still sends an acknowledgement: fenced by the coordinator
            staleWrite(k, oldEpoch, k.stateEpoch, "stale-leader-write");
        }
        rebuild(k, o);
    }

    private void reload(KeySim k) {
        Outcome o = read(k, k.leaderEpoch, "read-reload");
        rebuild(k, o);
    }

    private void alterOffsets(KeySim k) {
        double r = rnd.nextDouble();
        long newStart;
        if (r < 0.3) {
            newStart = k.logStart;
        } else if (r < 0.5) {
            newStart = k.leo;
        } else if (r < 0.75) {
            newStart = Math.max(0, k.spso - 1 - rnd.nextInt(500));
        } else {
            newStart = k.spso + 1 + rnd.nextInt(1000);
        }
        int newStateEpoch = k.stateEpoch + 1;
        KafkaShard.Outcome o = writer.initialize(k.key, newStateEpoch, newStart);
        result("initialize-alter-offsets", o.errorCode());
        emit(o.records(), "initialize-alter-offsets");
        if (o.errorCode() != 0) {
            return;
        }
        if (rnd.nextDouble() < 0.5) {
            staleWrite(k, k.leaderEpoch, k.stateEpoch, "stale-state-epoch-write");
        }
        k.stateEpoch = newStateEpoch;
        k.leo = Math.max(k.leo, newStart);
        reload(k);
    }

    private void delete(KeySim k) {
        KafkaShard.Outcome o = writer.delete(k.key);
        result("delete-state", o.errorCode());
        emit(o.records(), "delete-state");
        if (rnd.nextDouble() < 0.3) {
            staleWrite(k, k.leaderEpoch, k.stateEpoch, "stale-write-after-delete");
        }
        if (rnd.nextDouble() < 0.1) {
            KafkaShard.Outcome again = writer.delete(k.key); // nothing to delete: no record
            result("delete-state-again", again.errorCode());
            emit(again.records(), "delete-state-again");
        }
        k.initialized = false;
        k.loaded = false;
        k.pending.clear();
        k.held = null;
    }

    private void create(KeySim k) {
        if (!k.everCreated) {
            k.leaderEpoch = rnd.nextDouble() < 0.5 ? 0 : rnd.nextInt(4);
            k.logStart = rnd.nextDouble() < 0.6 ? 0 : rnd.nextInt(100_000);
            k.leo = k.logStart + rnd.nextInt(5000);
        }
        if (V41) {
            int se = !k.everCreated ? 0 : rnd.nextBoolean() ? 0 : k.stateEpoch + 1;
            double r = rnd.nextDouble();
            long start = r < 0.7 ? -1 : r < 0.85 ? k.logStart : k.logStart + rnd.nextInt(1000);
            KafkaShard.Outcome o = writer.initialize(k.key, se, start);
            result("initialize", o.errorCode());
            emit(o.records(), k.everCreated ? "initialize-recreate" : "initialize");
            if (o.errorCode() != 0) {
                return;
            }
            k.stateEpoch = se;
        }
        k.initialized = true;
        k.everCreated = true;
        load(k, "read-load");
    }

    private void load(KeySim k, String op) {
        rebuild(k, read(k, k.leaderEpoch, op));
    }

    private void deleteTopic() {
        Uuid topic = keys.get(rnd.nextInt(keys.size())).key.topicId();
        emit(writer.cleanupTopics(Set.of(topic)), "topic-deleted-cleanup");
        count("topic-deleted-cleanup");
        for (KeySim k : keys) {
            if (k.key.topicId().equals(topic)) {
                k.dead = true;
            }
        }
    }

    /** Rebuilds the leader's in-flight state from a ReadShareGroupState response, as a leader does on load. */
    private void rebuild(KeySim k, Outcome o) {
        k.pending.clear();
        k.held = null;
        k.holdUntilRecords = -1;
        if (o.errorCode != 0) {
            if (o.errorCode == Errors.INVALID_REQUEST.code()) {
                k.initialized = false;
            }
            k.loaded = false;
            return;
        }
        ReadShareGroupStateResponseData.PartitionResult pr = o.result;
        k.stateEpoch = pr.stateEpoch();
        long start = pr.startOffset();
        if (start < 0) {
            start = k.earliest ? k.logStart : k.leo; // share.auto.offset.reset
        }
        k.spso = start;
        k.inflight.clear();
        k.batchBounds.clear();
        long end = start;
        for (ReadShareGroupStateResponseData.StateBatch b : pr.stateBatches()) {
            if (b.lastOffset() < start) {
                continue;
            }
            long first = Math.max(b.firstOffset(), start);
            byte st = b.deliveryState() == ACQUIRED ? AVAILABLE : b.deliveryState();
            for (long off = first; off <= b.lastOffset(); off++) {
                k.inflight.put(off, new Rec(st, b.deliveryCount(), -1));
            }
            k.batchBounds.put(first, b.lastOffset());
            end = Math.max(end, b.lastOffset() + 1);
        }
        for (long off = start; off < end; off++) {
            if (!k.inflight.containsKey(off)) {
                k.inflight.put(off, new Rec(AVAILABLE, (short) 0, -1));
                Map.Entry<Long, Long> b = k.batchBounds.floorEntry(off);
                if (b == null || b.getValue() < off) {
                    k.batchBounds.put(off, off);
                }
            }
        }
        k.fetchEnd = end;
        k.leo = Math.max(k.leo, end);
        k.logStart = Math.min(k.logStart, start);
        advanceSpso(k);
        k.loaded = true;
        k.lastSentStart = pr.startOffset();
    }

    // ------------------------------------------------------------------------------------ requests

    record Outcome(short errorCode, ReadShareGroupStateResponseData.PartitionResult result) { }

    private Outcome read(KeySim k, int leaderEpoch, String op) {
        KafkaShard.Outcome o = writer.read(k.key, leaderEpoch);
        result(op, o.errorCode());
        emit(o.records(), op);
        return new Outcome(o.errorCode(), (ReadShareGroupStateResponseData.PartitionResult) o.partitionResult());
    }

    private void sendWrite(KeySim k, long start, int dcc, List<long[]> batches, String op) {
        int stateEpoch = k.stateEpoch;
        int leaderEpoch = k.leaderEpoch;
        List<long[]> bs = new ArrayList<>(batches);
        if (start == k.lastSentStart && rnd.nextDouble() < 0.08 + chaos) {
            start = -1; // "start offset unchanged"
        }
        if (!bs.isEmpty() && rnd.nextDouble() < 0.02 + chaos * 0.3) {
            bs.add(bs.get(rnd.nextInt(bs.size())).clone()); // duplicate batch in one request
            count("dup-batch");
        }
        if (!bs.isEmpty() && rnd.nextDouble() < 0.03 + chaos * 0.3) {
            // an overlapping batch with a higher, lower or equal delivery count
            long[] b = bs.get(rnd.nextInt(bs.size()));
            long f = b[0] + rnd.nextInt((int) Math.min(50, b[1] - b[0] + 1));
            long l = Math.min(b[1] + rnd.nextInt(5), f + rnd.nextInt(20));
            long cnt = Math.max(0, b[3] + rnd.nextInt(3) - 1);
            byte[] states = {AVAILABLE, ACKNOWLEDGED, ARCHIVED};
            bs.add(new long[] {f, l, states[rnd.nextInt(3)], cnt});
            count("overlap-batch");
        }
        if (chaos > 0 && rnd.nextDouble() < chaos * 0.3) {
            Collections.shuffle(bs, rnd);
        }
        if (rnd.nextDouble() < 0.004 + chaos * 0.1) {
            leaderEpoch = -1;
        }
        if (rnd.nextDouble() < 0.004 + chaos * 0.1) {
            stateEpoch = -1;
        }
        doWrite(k, stateEpoch, leaderEpoch, start, dcc, bs, "write-" + op);
        if (rnd.nextDouble() < 0.01 + chaos * 0.2) {
            doWrite(k, stateEpoch, leaderEpoch, start, dcc, bs, "write-" + op + "-retry");
        }
        if (start != -1) {
            k.lastSentStart = start;
        }
    }

    private void doWrite(KeySim k, int stateEpoch, int leaderEpoch, long start, int dcc, List<long[]> bs, String op) {
        KafkaShard.Outcome o = writer.write(k.key, stateEpoch, leaderEpoch, start, dcc, bs);
        result(op, o.errorCode());
        emit(o.records(), op);
    }

    /** A write from a leader that no longer owns the state (old leader/state epoch, or deleted key). */
    private void staleWrite(KeySim k, int leaderEpoch, int stateEpoch, String op) {
        List<long[]> bs = new ArrayList<>();
        if (!k.pending.isEmpty()) {
            Delivery d = k.pending.get(0);
            for (long[] r : d.ranges) {
                Rec rec = k.inflight.get(r[0]);
                bs.add(new long[] {r[0], r[1], ACKNOWLEDGED, rec == null ? 1 : rec.count});
            }
        }
        doWrite(k, stateEpoch, leaderEpoch, k.spso, k.terminalCount(), bs, op);
    }

    private void advanceTime(long ms) {
        long targetMs = time.milliseconds() + ms;
        while (KafkaShard.COLD_SNAPSHOT != null && nextColdMs <= targetMs) {
            // the share coordinator's cold-partition timer (ShareCoordinatorService) firing at its interval
            time.setMs(nextColdMs);
            List<CoordinatorRecord> recs = writer.snapshotColdPartitions();
            count(recs.isEmpty() ? "cold-snapshot-timer-empty" : "cold-snapshot-timer-records");
            emit(recs, "cold-snapshot");
            nextColdMs += coldIntervalMs;
        }
        time.setMs(targetMs);
    }

    private void result(String op, short errorCode) {
        count(op);
        if (errorCode != 0) {
            stats.count("rejected:" + op.replaceAll("^write-.*?(-retry)?$", "write") + ":" + Errors.forCode(errorCode).name());
        }
    }

    private void count(String op) {
        opCounts.merge(op, 1, Integer::sum);
    }

    // ------------------------------------------------------------------------------------ log + expected

    private void emit(List<CoordinatorRecord> records, String op) {
        for (CoordinatorRecord r : records) {
            long offset = baseOffset + log.size();
            byte[] kb = serde.serializeKey(r);
            byte[] vb = serde.serializeValue(r);
            CoordinatorRecord back = serde.deserialize(ByteBuffer.wrap(kb), vb == null ? null : ByteBuffer.wrap(vb));
            if (!back.equals(r)) {
                throw new IllegalStateException("serde round trip differs: " + r + " / " + back);
            }
            int type = ByteBuffer.wrap(kb).getShort();
            writer.replay(offset, r);    // the coordinator runtime replays what the shard generated
            reader.replay(offset, back); // the loader replays what it reads from the log
            ObjectNode expected = Json.F.objectNode();
            for (KeySim k : keys) {
                ShareGroupOffset rs = reader.state(k.key);
                ShareGroupOffset ws = writer.state(k.key);
                if (!Objects.equals(rs, ws)) {
                    throw new IllegalStateException("writer and reader states differ for " + k.key.id() + ": " + ws + " / " + rs);
                }
                ShareGroupOffset prev = lastState.get(k.key.id());
                if (!Objects.equals(prev, rs)) {
                    expected.set(k.key.id(), rs == null ? Json.F.nullNode() : KafkaShard.stateJson(rs));
                    lastState.put(k.key.id(), rs);
                }
                if (rs != null) {
                    maxBatches = Math.max(maxBatches, rs.stateBatches().size());
                }
            }
            Long cut = reader.pruningCutoff();
            if (!Objects.equals(cut, writer.pruningCutoff())) {
                throw new IllegalStateException("writer and reader pruning cut-offs differ");
            }
            ObjectNode rec = Json.F.objectNode();
            rec.put("offset", offset);
            rec.put("key_hex", GoldenWriter.hex(kb));
            if (vb == null) {
                rec.putNull("value_hex");
            } else {
                rec.put("value_hex", GoldenWriter.hex(vb));
            }
            rec.put("op", op);
            rec.set("expected", expected);
            if (cut == null) {
                rec.putNull("pruning_cutoff");
            } else {
                rec.put("pruning_cutoff", cut);
            }
            recordsJson.add(rec);
            log.add(new LogEntry(offset, kb, vb, back, vb == null ? -1 : type));
            stats.count(vb == null ? "records:tombstone" : type == 0 ? "records:snapshot" : "records:update");
            stats.count("records-by-op:" + op + ":" + (vb == null ? "tombstone" : type == 0 ? "snapshot" : "update"));
        }
    }

    /** Final states of every live key of a reader shard. */
    private ObjectNode finalStates(KafkaShard shard, Map<String, ShareGroupOffset> into) {
        ObjectNode o = Json.F.objectNode();
        for (KeySim k : keys) {
            ShareGroupOffset s = shard.state(k.key);
            if (s != null) {
                o.set(k.key.id(), KafkaShard.stateJson(s));
            }
            if (into != null) {
                into.put(k.key.id(), s);
            }
        }
        return o;
    }

    /** Replays records [start..] into a fresh reader; returns its states (key id -> state or null). */
    private KafkaShard replaySuffix(int start) {
        KafkaShard r = new KafkaShard(recordsPerSnapshot, coldIntervalMs, new ManualTime(T0), 0);
        for (int i = start; i < log.size(); i++) {
            LogEntry e = log.get(i);
            r.replay(e.offset(), e.record());
        }
        return r;
    }

    private ObjectNode toJson() {
        Map<String, ShareGroupOffset> full = new HashMap<>();
        ObjectNode finalJson = finalStates(reader, full);

        // Suffix replays, as when Kafka pruned the log head. The pruning cut-off one is checked for every
        // sequence (statistics); about 10% of the sequences also carry their suffix replays in the file.
        boolean sample = rnd.nextDouble() < 0.10 && log.size() >= 3;
        ArrayNode suffixes = Json.F.arrayNode();
        Long cut = reader.pruningCutoff();
        List<Object[]> starts = new ArrayList<>();
        if (cut != null && cut - baseOffset > 0 && cut - baseOffset < log.size()) {
            starts.add(new Object[] {"pruning_cutoff", (int) (cut - baseOffset)});
        }
        if (sample) {
            List<Integer> snaps = new ArrayList<>();
            List<Integer> updates = new ArrayList<>();
            for (int i = 1; i < log.size(); i++) {
                if (log.get(i).type() == 0) {
                    snaps.add(i);
                } else if (log.get(i).type() == 1) {
                    updates.add(i);
                }
            }
            if (!snaps.isEmpty()) {
                starts.add(new Object[] {"snapshot", snaps.get(rnd.nextInt(snaps.size()))});
            }
            if (!updates.isEmpty()) {
                starts.add(new Object[] {"update", updates.get(rnd.nextInt(updates.size()))});
            }
            if (rnd.nextBoolean()) {
                starts.add(new Object[] {"random", 1 + rnd.nextInt(log.size() - 1)});
            }
        }
        for (Object[] s : starts) {
            String kind = (String) s[0];
            int start = (Integer) s[1];
            KafkaShard r = replaySuffix(start);
            try {
                Map<String, ShareGroupOffset> states = new HashMap<>();
                ObjectNode expected = finalStates(r, states);
                boolean same = states.equals(full);
                stats.count("suffix-replay:" + kind + ":" + (same ? "final-state-equal" : "final-state-differs"));
                if (!same && kind.equals("pruning_cutoff")) {
                    stats.example("pruning-cutoff-suffix-differs", "sequence " + index);
                }
                if (sample) {
                    ObjectNode so = Json.F.objectNode();
                    so.put("start_index", start);
                    so.put("start_offset", log.get(start).offset());
                    so.put("kind", kind);
                    so.set("expected", expected);
                    Long c = r.pruningCutoff();
                    if (c == null) {
                        so.putNull("pruning_cutoff");
                    } else {
                        so.put("pruning_cutoff", c);
                    }
                    so.put("same_as_full_replay", same);
                    suffixes.add(so);
                }
            } finally {
                r.close();
            }
        }
        stats.max("max_batches_in_a_state", maxBatches);
        if (maxBatches >= 100) {
            stats.count("sequences-with-100+-batches-in-a-state");
        }

        ObjectNode line = Json.F.objectNode();
        line.put("sequence", index);
        line.put("release", release);
        line.put("records_per_snapshot", recordsPerSnapshot);
        ArrayNode keyArray = Json.F.arrayNode();
        for (KeySim k : keys) {
            keyArray.add(k.key.json());
        }
        line.set("keys", keyArray);
        ObjectNode model = Json.F.objectNode();
        model.put("profile", profile);
        model.put("delivery_count_limit", deliveryLimit);
        model.put("base_offset", baseOffset);
        if (KafkaShard.HAS_COLD_INTERVAL_CONFIG) {
            model.put("cold_partition_snapshot_interval_ms", coldIntervalMs);
        } else {
            model.putNull("cold_partition_snapshot_interval_ms");
        }
        model.put("max_batches_in_a_state", maxBatches);
        ObjectNode ops = Json.F.objectNode();
        opCounts.forEach(ops::put);
        model.set("calls", ops);
        line.set("model", model);
        line.set("records", recordsJson);
        line.set("final", finalJson);
        line.set("suffix_replays", suffixes);
        return line;
    }
}
