package sharestate.harness;

import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.zip.Deflater;
import java.util.zip.GZIPOutputStream;

/**
 * Writes {@code corpus.jsonl.gz} (one sequence per line, see {@link CorpusSequence}) and
 * {@code corpus_stats.json}. Each sequence gets its own seed derived from (seed, sequence index),
 * so a sequence's model parameters do not depend on the other sequences.
 */
final class ReplayCorpus {
    private final String release;
    private final long seed;
    private final int sequences;

    ReplayCorpus(String release, long seed, int sequences) {
        this.release = release;
        this.seed = seed;
        this.sequences = sequences;
    }

    /** SplitMix64 of (seed, index). */
    static long sequenceSeed(long seed, int index) {
        long z = seed + 0x9E3779B97F4A7C15L * (index + 1);
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** A gzip stream at the best compression level (the format is the same; only the size changes). */
    static OutputStream gzip(Path file) throws IOException {
        return new GZIPOutputStream(Files.newOutputStream(file), 1 << 16) {
            {
                def.setLevel(Deflater.BEST_COMPRESSION);
            }
        };
    }

    String generate(Path outDir) throws IOException {
        Files.createDirectories(outDir);
        Path file = outDir.resolve("corpus.jsonl.gz");
        CorpusStats stats = new CorpusStats();
        // GZIPOutputStream writes MTIME 0 and no file name, so the bytes depend only on the content.
        try (Writer w = new BufferedWriter(new OutputStreamWriter(gzip(file), StandardCharsets.UTF_8), 1 << 16)) {
            for (int i = 0; i < sequences; i++) {
                ObjectNode line = new CorpusSequence(release, i, sequenceSeed(seed, i), stats).run();
                w.write(Json.MAPPER.writeValueAsString(line));
                w.write('\n');
            }
        }
        ObjectNode summary = Json.F.objectNode();
        summary.put("release", release);
        summary.put("seed", seed);
        summary.put("sequences", sequences);
        summary.setAll(stats.json());
        Files.writeString(outDir.resolve("corpus_stats.json"),
            Json.MAPPER.writerWithDefaultPrettyPrinter().writeValueAsString(summary) + "\n", StandardCharsets.UTF_8);
        return file + ": " + sequences + " sequences, " + (stats.get("records:snapshot") + stats.get("records:update")
            + stats.get("records:tombstone")) + " records (" + stats.get("records:snapshot") + " snapshots, "
            + stats.get("records:update") + " updates, " + stats.get("records:tombstone") + " tombstones), "
            + Files.size(file) + " bytes";
    }
}
