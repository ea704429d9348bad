package sharestate.harness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.share.ShareCoordinatorRecordSerde;
import org.apache.kafka.coordinator.share.ShareGroupOffset;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.zip.GZIPInputStream;

/**
 * Measures Kafka's own single-thread replay rate: records/s through {@code ShareCoordinatorShard.replay}
 * (one fresh shard per sequence, records in log order), after warm-up passes. Two timings:
 * <ul>
 *   <li>{@code replay_only}: records already deserialized to {@code CoordinatorRecord}s;</li>
 *   <li>{@code deserialize_and_replay}: {@code ShareCoordinatorRecordSerde.deserialize} of the key/value bytes,
 *       then replay (what the coordinator's loader does per record, minus reading the log).</li>
 * </ul>
 * Input: a corpus file (lines with "records") or a records file (lines with key_hex/value_hex, one log),
 * gzip if the name ends in .gz. Use realistic records: Kafka 4.0-4.3's batch combiner never returns for a
 * batch with first offset > last offset that overlaps another one (the golden files contain such values). Shard construction is outside the timed region. Each timed pass replays the
 * whole input as many times as needed for about 2 s of replay (sized after the warm-up).
 */
final class ReplayBench {
    private record Seq(int recordsPerSnapshot, long[] offsets, byte[][] keys, byte[][] values) { }

    private final ShareCoordinatorRecordSerde serde = new ShareCoordinatorRecordSerde();
    private int timedReps;

    /**
     * Replays every sequence into a fresh shard; only the replay loop (and, if asked, deserialization)
     * is timed, shard construction is not. Returns the checksum of the final states.
     */
    private long timedPass(List<Seq> seqs, List<List<CoordinatorRecord>> decoded, boolean deserialize, long[] ns) {
        long total = 0;
        long sum = 0;
        for (int i = 0; i < seqs.size(); i++) {
            Seq s = seqs.get(i);
            KafkaShard shard = new KafkaShard(s.recordsPerSnapshot(), 300_000, new ManualTime(CorpusSequence.T0), 0);
            long[] offsets = s.offsets();
            long t0;
            if (deserialize) {
                byte[][] keys = s.keys();
                byte[][] values = s.values();
                t0 = System.nanoTime();
                for (int j = 0; j < offsets.length; j++) {
                    shard.replay(offsets[j], deserialize(keys[j], values[j]));
                }
            } else {
                List<CoordinatorRecord> recs = decoded.get(i);
                t0 = System.nanoTime();
                for (int j = 0; j < offsets.length; j++) {
                    shard.replay(offsets[j], recs.get(j));
                }
            }
            total += System.nanoTime() - t0;
            sum = sum * 31 + checksum(shard, decoded.get(i));
            shard.close();
        }
        ns[0] = total;
        return sum;
    }

    static List<Seq> load(Path input) throws IOException {
        List<Seq> seqs = new ArrayList<>();
        List<long[]> flatOffsets = new ArrayList<>();
        List<byte[]> flatKeys = new ArrayList<>();
        List<byte[]> flatValues = new ArrayList<>();
        HexFormat hex = HexFormat.of();
        try (InputStream raw = Files.newInputStream(input);
             InputStream in = input.toString().endsWith(".gz") ? new GZIPInputStream(raw, 1 << 16) : raw;
             BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8), 1 << 16)) {
            String line;
            while ((line = r.readLine()) != null) {
                if (line.isBlank()) {
                    continue;
                }
                JsonNode n = Json.MAPPER.readTree(line);
                if (n.has("records")) {
                    JsonNode recs = n.get("records");
                    int size = recs.size();
                    long[] offsets = new long[size];
                    byte[][] keys = new byte[size][];
                    byte[][] values = new byte[size][];
                    for (int i = 0; i < size; i++) {
                        JsonNode rec = recs.get(i);
                        offsets[i] = rec.get("offset").asLong();
                        keys[i] = hex.parseHex(rec.get("key_hex").asText());
                        JsonNode v = rec.get("value_hex");
                        values[i] = v == null || v.isNull() ? null : hex.parseHex(v.asText());
                    }
                    int rps = n.has("records_per_snapshot") ? n.get("records_per_snapshot").asInt() : 500;
                    seqs.add(new Seq(rps, offsets, keys, values));
                } else if (n.has("key_hex")) {
                    flatOffsets.add(new long[] {n.has("offset") ? n.get("offset").asLong() : flatKeys.size()});
                    flatKeys.add(hex.parseHex(n.get("key_hex").asText()));
                    JsonNode v = n.get("value_hex");
                    flatValues.add(v == null || v.isNull() ? null : hex.parseHex(v.asText()));
                }
            }
        }
        if (!flatKeys.isEmpty()) {
            long[] offsets = flatOffsets.stream().mapToLong(a -> a[0]).toArray();
            seqs.add(new Seq(500, offsets, flatKeys.toArray(new byte[0][]), flatValues.toArray(new byte[0][])));
        }
        return seqs;
    }

    /** A value depending on every replayed state, so the JIT cannot drop the work; equal across passes. */
    private static long checksum(KafkaShard shard, List<CoordinatorRecord> records) {
        long sum = 0;
        for (CoordinatorRecord r : records) {
            org.apache.kafka.common.protocol.ApiMessage key = Compat.keyMessage(r);
            KafkaShard.SpKey k;
            if (key instanceof org.apache.kafka.coordinator.share.generated.ShareSnapshotKey sk) {
                k = KafkaShard.SpKey.of(sk.groupId(), sk.topicId(), sk.partition());
            } else {
                org.apache.kafka.coordinator.share.generated.ShareUpdateKey uk =
                    (org.apache.kafka.coordinator.share.generated.ShareUpdateKey) key;
                k = KafkaShard.SpKey.of(uk.groupId(), uk.topicId(), uk.partition());
            }
            ShareGroupOffset s = shard.state(k);
            if (s != null) {
                sum = sum * 31 + s.startOffset() + s.stateBatches().size();
            }
        }
        return sum;
    }

    String run(String release, Path input, int warmup, int passes) throws IOException {
        List<Seq> seqs = load(input);
        long totalRecords = 0;
        long totalBytes = 0;
        List<List<CoordinatorRecord>> decoded = new ArrayList<>();
        for (Seq s : seqs) {
            List<CoordinatorRecord> l = new ArrayList<>(s.keys().length);
            for (int i = 0; i < s.keys().length; i++) {
                l.add(deserialize(s.keys()[i], s.values()[i]));
                totalBytes += s.keys()[i].length + (s.values()[i] == null ? 0 : s.values()[i].length);
            }
            totalRecords += l.size();
            decoded.add(l);
        }
        double[] replayOnly = new double[passes];
        double[] withDeserialize = new double[passes];
        Long expectedChecksum = null;
        int reps = 1;
        for (int pass = 0; pass < warmup + passes; pass++) {
            long replayNs = 0;
            long deserializeNs = 0;
            for (int rep = 0; rep < reps; rep++) {
                long[] ns = new long[1];
                long c = timedPass(seqs, decoded, false, ns);
                replayNs += ns[0];
                long c2 = timedPass(seqs, decoded, true, ns);
                deserializeNs += ns[0];
                if (expectedChecksum == null) {
                    expectedChecksum = c;
                }
                if (c != expectedChecksum || c2 != expectedChecksum) {
                    throw new IllegalStateException("replay results differ between passes");
                }
            }
            if (pass == warmup - 1 || (warmup == 0 && pass == 0)) {
                // size the timed passes to about 2 s of replay each, so timer noise does not matter
                reps = (int) Math.max(1, Math.ceil(2e9 / Math.max(1, replayNs / reps)));
                reps = (int) Math.min(reps, Math.max(1, 5_000_000L / Math.max(1, totalRecords))); // small inputs
            }
            if (pass >= warmup) {
                replayOnly[pass - warmup] = totalRecords * (double) reps / (replayNs / 1e9);
                withDeserialize[pass - warmup] = totalRecords * (double) reps / (deserializeNs / 1e9);
            }
        }
        timedReps = reps;
        ObjectNode o = Json.F.objectNode();
        o.put("release", release);
        o.put("input", input.toString());
        o.put("sequences", seqs.size());
        o.put("records", totalRecords);
        o.put("record_bytes", totalBytes);
        o.put("warmup_passes", warmup);
        o.put("timed_passes", passes);
        o.put("corpus_replays_per_timed_pass", timedReps);
        o.set("replay_only", rates(replayOnly));
        o.set("deserialize_and_replay", rates(withDeserialize));
        o.put("java", System.getProperty("java.vm.name") + " " + System.getProperty("java.version"));
        o.put("available_processors", Runtime.getRuntime().availableProcessors());
        o.put("note", "single thread; one fresh ShareCoordinatorShard per sequence, built outside the timed region; "
            + "no coordinator runtime (no snapshot-registry commits, no log reads)");
        return Json.MAPPER.writerWithDefaultPrettyPrinter().writeValueAsString(o);
    }

    private CoordinatorRecord deserialize(byte[] key, byte[] value) {
        return serde.deserialize(ByteBuffer.wrap(key), value == null ? null : ByteBuffer.wrap(value));
    }

    private static ObjectNode rates(double[] perPass) {
        double[] sorted = perPass.clone();
        Arrays.sort(sorted);
        ObjectNode o = Json.F.objectNode();
        o.put("records_per_sec_median", Math.round(sorted[sorted.length / 2]));
        o.put("records_per_sec_best", Math.round(sorted[sorted.length - 1]));
        o.put("records_per_sec_worst", Math.round(sorted[0]));
        ArrayNode a = o.putArray("records_per_sec_per_pass");
        for (double d : perPass) {
            a.add(Math.round(d));
        }
        return o;
    }
}
