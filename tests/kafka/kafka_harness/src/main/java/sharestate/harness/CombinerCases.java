package sharestate.harness;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.coordinator.share.PersisterStateBatchCombiner;
import org.apache.kafka.server.share.persister.PersisterStateBatch;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/**
 * Batch-merge cases run through this release's
 * {@code new PersisterStateBatchCombiner(current, new, startOffset).combineStateBatches()} (same public
 * constructor in 4.0 - 4.4). The inputs depend only on the seed, never on the release, so the files of
 * two releases can be compared line by line.
 */
final class CombinerCases {
    private final Random rnd;
    private final List<Object[]> cases = new ArrayList<>(); // name, current, new, startOffset

    CombinerCases(long seed) {
        this.rnd = new Random(seed ^ 0x5EED_C0B1L);
    }

    private static long[] b(long first, long last, int state, int count) {
        return new long[] {first, last, state, count};
    }

    private void add(String name, List<long[]> current, List<long[]> added, long start) {
        cases.add(new Object[] {name, current, added, start});
    }

    private void edgeCases() {
        add("empty-empty-no-start", List.of(), List.of(), -1);
        add("empty-empty-start", List.of(), List.of(), 5);
        add("one-current-no-start", List.of(b(0, 9, 2, 1)), List.of(), -1);
        add("one-new-no-start", List.of(), List.of(b(0, 9, 0, 1)), -1);
        add("one-current-start-inside", List.of(b(0, 9, 2, 1)), List.of(), 5);
        add("one-current-start-before", List.of(b(10, 19, 2, 1)), List.of(), 5);
        add("one-current-start-after", List.of(b(0, 9, 2, 1)), List.of(), 10);
        add("one-current-start-at-last", List.of(b(0, 9, 2, 1)), List.of(), 9);
        add("two-one-pruned-away", List.of(b(0, 4, 2, 1)), List.of(b(6, 9, 0, 1)), 5);
        add("two-both-pruned-away", List.of(b(0, 4, 2, 1)), List.of(b(2, 3, 0, 1)), 5);
        add("exact-duplicate", List.of(b(0, 9, 2, 1)), List.of(b(0, 9, 2, 1)), -1);
        add("exact-duplicate-in-new", List.of(), List.of(b(0, 9, 2, 1), b(0, 9, 2, 1)), -1);
        add("triple-duplicate", List.of(b(3, 7, 0, 2)), List.of(b(3, 7, 0, 2), b(3, 7, 0, 2)), 3);
        add("same-range-higher-count-wins", List.of(b(0, 9, 2, 1)), List.of(b(0, 9, 0, 2)), -1);
        add("same-range-lower-count-loses", List.of(b(0, 9, 0, 3)), List.of(b(0, 9, 2, 2)), -1);
        add("same-range-same-count-archived-beats-acked", List.of(b(0, 9, 2, 1)), List.of(b(0, 9, 4, 1)), -1);
        add("same-range-same-count-acked-beats-available", List.of(b(0, 9, 2, 1)), List.of(b(0, 9, 0, 1)), -1);
        add("contiguous-equal-coalesce", List.of(b(0, 4, 2, 1)), List.of(b(5, 9, 2, 1)), -1);
        add("contiguous-different-kept", List.of(b(0, 4, 2, 1)), List.of(b(5, 9, 0, 1)), -1);
        add("gap-kept", List.of(b(0, 4, 2, 1)), List.of(b(6, 9, 2, 1)), -1);
        add("nested-higher", List.of(b(0, 9, 0, 1)), List.of(b(3, 5, 2, 2)), -1);
        add("nested-lower", List.of(b(0, 9, 0, 3)), List.of(b(3, 5, 2, 2)), -1);
        add("same-first-new-longer-higher", List.of(b(0, 4, 0, 1)), List.of(b(0, 9, 2, 1)), -1);
        add("same-first-new-longer-lower", List.of(b(0, 4, 2, 2)), List.of(b(0, 9, 0, 1)), -1);
        add("same-first-new-shorter-higher", List.of(b(0, 9, 0, 1)), List.of(b(0, 4, 2, 2)), -1);
        add("same-first-new-shorter-lower", List.of(b(0, 9, 2, 2)), List.of(b(0, 4, 0, 1)), -1);
        add("same-last-higher", List.of(b(0, 9, 0, 1)), List.of(b(5, 9, 2, 1)), -1);
        add("same-last-lower", List.of(b(0, 9, 2, 1)), List.of(b(5, 9, 0, 1)), -1);
        add("extends-past-higher", List.of(b(0, 9, 0, 1)), List.of(b(5, 14, 2, 1)), -1);
        add("extends-past-lower", List.of(b(0, 9, 2, 1)), List.of(b(5, 14, 0, 1)), -1);
        add("finalized-then-contiguous-equal", List.of(b(0, 4, 2, 1), b(5, 9, 0, 1)), List.of(b(5, 12, 2, 1)), -1);
        add("finalized-then-contiguous-equal-2", List.of(b(0, 4, 2, 1)), List.of(b(5, 9, 0, 1), b(5, 12, 2, 1)), -1);
        add("split-then-coalesce", List.of(b(0, 9, 2, 1), b(10, 19, 0, 1)), List.of(b(10, 14, 2, 1)), -1);
        add("worked-example-134", List.of(b(110, 110, 0, 1), b(111, 118, 0, 0), b(119, 119, 2, 1)),
            List.of(b(111, 112, 0, 1)), -1);
        add("worked-example-135", List.of(b(110, 112, 0, 1), b(113, 118, 0, 0), b(119, 119, 2, 1)),
            List.of(b(113, 118, 2, 1)), -1);
        add("worked-example-136", List.of(b(110, 112, 0, 1), b(113, 119, 2, 1)), List.of(b(110, 110, 2, 2)), -1);
        add("worked-example-137", List.of(b(110, 110, 2, 2), b(111, 112, 0, 1), b(113, 119, 2, 1)), List.of(), 120);
        add("start-backwards-no-prune", List.of(b(100, 109, 2, 1), b(110, 119, 0, 2)), List.of(b(105, 112, 4, 2)), 50);
        add("start-backwards-zero", List.of(b(100, 109, 2, 1)), List.of(b(100, 104, 0, 2)), 0);
        add("start-cuts-both", List.of(b(0, 9, 2, 1)), List.of(b(5, 14, 0, 2)), 7);
        add("unsorted-current", List.of(b(20, 29, 0, 1), b(0, 9, 2, 1), b(10, 19, 4, 1)), List.of(), -1);
        add("unsorted-current-single-after-prune", List.of(b(20, 29, 0, 1), b(0, 9, 2, 1)), List.of(), 15);
        add("unsorted-non-overlapping-two", List.of(b(20, 29, 0, 1)), List.of(b(0, 9, 2, 1)), -1);
        add("count-zero-vs-one", List.of(b(0, 9, 0, 0)), List.of(b(3, 4, 0, 1)), -1);
        add("single-offset-batches", List.of(b(5, 5, 2, 1), b(6, 6, 2, 1), b(7, 7, 0, 1), b(8, 8, 2, 1)), List.of(), -1);
        add("many-singletons-equal", singletons(0, 40, 2, 1), List.of(), -1);
        add("chain-of-three", List.of(b(0, 9, 0, 1)), List.of(b(2, 12, 2, 2), b(4, 6, 4, 3)), -1);
        add("three-same-first", List.of(b(0, 3, 0, 1), b(0, 6, 2, 1)), List.of(b(0, 9, 0, 2)), -1);
        add("lower-count-overlaps-two", List.of(b(0, 4, 2, 3), b(5, 9, 0, 3)), List.of(b(2, 7, 4, 1)), -1);
        add("new-covers-everything-lower", List.of(b(0, 4, 2, 3), b(6, 9, 0, 3)), List.of(b(0, 20, 0, 1)), -1);
        add("new-covers-everything-higher", List.of(b(0, 4, 2, 1), b(6, 9, 0, 1)), List.of(b(0, 20, 4, 5)), -1);
        // Values Kafka would not write; they show how each release reacts to odd input.
        add("unrealistic-acquired-state", List.of(b(0, 9, 1, 1)), List.of(b(5, 14, 0, 1)), -1);
        add("unrealistic-state-3", List.of(b(0, 9, 3, 1)), List.of(b(5, 14, 2, 1)), -1);
        add("unrealistic-negative-count", List.of(b(0, 9, 2, -1)), List.of(b(5, 14, 0, 0)), -1);
        // (first > last is left out: the pre-4.4 merge loop does not terminate on it.)
        add("unrealistic-last-is-long-max", List.of(b(0, Long.MAX_VALUE, 2, 1)), List.of(b(5, 14, 0, 2)), -1);
        add("unrealistic-start-minus-two", List.of(b(0, 9, 2, 1)), List.of(b(5, 14, 0, 2)), -2);
    }

    private static List<long[]> singletons(long from, long to, int state, int count) {
        List<long[]> l = new ArrayList<>();
        for (long o = from; o <= to; o++) {
            l.add(b(o, o, state, count));
        }
        return l;
    }

    private int randomState() {
        int r = rnd.nextInt(10);
        return r < 4 ? 0 : r < 8 ? 2 : 4;
    }

    /** A normalized state: sorted, non-overlapping batches (with gaps), as Kafka holds after a merge. */
    private List<long[]> normalized(long from, int n) {
        List<long[]> l = new ArrayList<>();
        long o = from;
        for (int i = 0; i < n; i++) {
            o += rnd.nextInt(4) == 0 ? rnd.nextInt(5) : 0;
            long len = 1 + rnd.nextInt(rnd.nextBoolean() ? 3 : 20);
            l.add(b(o, o + len - 1, randomState(), 1 + rnd.nextInt(4)));
            o += len;
        }
        return l;
    }

    private List<long[]> soup(long from, long span, int n, boolean realisticStates) {
        List<long[]> l = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            long f = from + (long) (rnd.nextDouble() * span);
            long last = f + rnd.nextInt(rnd.nextBoolean() ? 3 : (int) Math.max(1, span / 3));
            int state = realisticStates ? randomState() : new int[] {0, 1, 2, 4}[rnd.nextInt(4)];
            l.add(b(f, last, state, rnd.nextInt(7)));
        }
        return l;
    }

    private long startFor(List<long[]> cur, List<long[]> add) {
        long min = Long.MAX_VALUE;
        long max = Long.MIN_VALUE;
        for (List<long[]> l : List.of(cur, add)) {
            for (long[] x : l) {
                min = Math.min(min, x[0]);
                max = Math.max(max, x[1]);
            }
        }
        if (min == Long.MAX_VALUE) {
            return rnd.nextBoolean() ? -1 : rnd.nextInt(100);
        }
        double r = rnd.nextDouble();
        if (r < 0.4) {
            return -1;
        } else if (r < 0.75) {
            return min + (long) (rnd.nextDouble() * (max - min + 1)); // inside: prunes / cuts
        } else if (r < 0.85) {
            return Math.max(0, min - 1 - rnd.nextInt(50)); // before everything ("moving backwards")
        } else if (r < 0.95) {
            return min;
        }
        return max + 1 + rnd.nextInt(10); // beyond everything
    }

    private void randomCases(int n) {
        for (int i = 0; i < n; i++) {
            double kind = rnd.nextDouble();
            List<long[]> cur;
            List<long[]> add;
            String name;
            if (kind < 0.45) {
                name = "random-state-plus-write-" + i;
                long from = rnd.nextInt(1000);
                cur = normalized(from, rnd.nextInt(12));
                long span = cur.isEmpty() ? 30 : cur.get(cur.size() - 1)[1] - from + 10;
                add = soup(from, span, 1 + rnd.nextInt(8), true);
            } else if (kind < 0.75) {
                name = "random-soup-" + i;
                cur = soup(0, 60, rnd.nextInt(20), false);
                add = soup(0, 60, rnd.nextInt(20), false);
            } else if (kind < 0.85) {
                name = "random-large-" + i;
                long from = rnd.nextInt(100_000);
                cur = normalized(from, 50 + rnd.nextInt(250));
                add = soup(from, 2000, 1 + rnd.nextInt(60), true);
            } else if (kind < 0.93) {
                name = "random-small-" + i;
                cur = soup(0, 8, rnd.nextInt(3), false);
                add = soup(0, 8, rnd.nextInt(2), false);
            } else {
                name = "random-duplicates-" + i;
                cur = normalized(rnd.nextInt(50), 1 + rnd.nextInt(6));
                add = new ArrayList<>();
                for (long[] x : cur) {
                    if (rnd.nextBoolean()) {
                        add.add(x.clone());
                    }
                }
                add.addAll(soup(0, 60, rnd.nextInt(3), true));
                Collections.shuffle(add, rnd);
            }
            if (rnd.nextDouble() < 0.1) {
                Collections.shuffle(cur, rnd);
            }
            add(name, cur, add, startFor(cur, add));
        }
    }

    private static List<PersisterStateBatch> toKafka(List<long[]> l) {
        List<PersisterStateBatch> out = new ArrayList<>(l.size());
        for (long[] x : l) {
            out.add(new PersisterStateBatch(x[0], x[1], (byte) x[2], (short) x[3]));
        }
        return out;
    }

    private static ArrayNode json(List<long[]> l) {
        ArrayNode a = Json.F.arrayNode();
        for (long[] x : l) {
            a.add(Json.F.arrayNode().add(x[0]).add(x[1]).add((int) x[2]).add((int) x[3]));
        }
        return a;
    }

    @SuppressWarnings("unchecked")
    String generate(Path outDir, int randomCount) throws IOException {
        edgeCases();
        randomCases(randomCount);
        Files.createDirectories(outDir);
        Path file = outDir.resolve("combiner.jsonl.gz");
        int errors = 0;
        try (Writer w = new BufferedWriter(new OutputStreamWriter(
                ReplayCorpus.gzip(file), StandardCharsets.UTF_8))) {
            for (Object[] c : cases) {
                List<long[]> cur = (List<long[]>) c[1];
                List<long[]> add = (List<long[]>) c[2];
                long start = (Long) c[3];
                ObjectNode line = Json.F.objectNode();
                line.put("case", (String) c[0]);
                line.set("current", json(cur));
                line.set("new", json(add));
                line.put("start_offset", start);
                try {
                    List<PersisterStateBatch> result =
                        new PersisterStateBatchCombiner(toKafka(cur), toKafka(add), start).combineStateBatches();
                    line.set("result", KafkaShard.batchesJson(result));
                } catch (RuntimeException | Error e) {
                    errors++;
                    line.putNull("result");
                    line.put("error", e.getClass().getName() + (e.getMessage() == null ? "" : ": " + e.getMessage()));
                }
                w.write(Json.MAPPER.writeValueAsString(line));
                w.write('\n');
            }
        }
        return file + ": " + cases.size() + " cases (" + errors + " threw)";
    }
}
