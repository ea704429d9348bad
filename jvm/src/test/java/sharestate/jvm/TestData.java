package sharestate.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import java.util.zip.GZIPInputStream;

/**
 * Kafka's own data in the repository (tests/kafka/): golden records and the replay corpus's
 * combiner cases. The repository root is the system property sharestate.repo (set by
 * scripts/test_jvm.sh), else the working directory.
 */
final class TestData {
  private static final ObjectMapper JSON = new ObjectMapper();

  private TestData() {}

  static Path kafka(String folder) {
    return Paths.get(System.getProperty("sharestate.repo", "."), "tests", "kafka", folder);
  }

  /** The release folders under tests/kafka/{folder}, e.g. "4.0.2", sorted. */
  static List<String> releases(String folder) throws IOException {
    try (Stream<Path> entries = Files.list(kafka(folder))) {
      return entries.filter(Files::isDirectory).map(p -> p.getFileName().toString()).sorted()
          .toList();
    }
  }

  /** One JSON value per line; a .gz file is read through gzip. */
  static List<JsonNode> jsonLines(Path file) throws IOException {
    List<JsonNode> lines = new ArrayList<>();
    try (InputStream raw = Files.newInputStream(file);
        InputStream in = file.toString().endsWith(".gz") ? new GZIPInputStream(raw) : raw;
        BufferedReader reader =
            new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
      for (String line = reader.readLine(); line != null; line = reader.readLine()) {
        lines.add(JSON.readTree(line));
      }
    }
    return lines;
  }

  static JsonNode json(String text) throws IOException {
    return JSON.readTree(text);
  }

  /** Lowercase hex to bytes; JSON null to null. */
  static byte[] hex(JsonNode text) {
    if (text == null || text.isNull()) {
      return null;
    }
    String s = text.asText();
    byte[] out = new byte[s.length() / 2];
    for (int i = 0; i < out.length; i++) {
      out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    }
    return out;
  }

  /** [[first, last, state, count], ...] as batches. */
  static FoldBatches batches(JsonNode list) {
    FoldBatches out = new FoldBatches();
    for (JsonNode b : list) {
      out.add(b.get(0).asLong(), b.get(1).asLong(), b.get(2).asInt(), b.get(3).asInt());
    }
    return out;
  }

  /** Batches as [[first, last, state, count], ...] text, to compare and to show. */
  static String text(FoldBatches b) {
    StringBuilder s = new StringBuilder("[");
    for (int i = 0; i < b.size; i++) {
      s.append(i == 0 ? "[" : ",[").append(b.first[i]).append(',').append(b.last[i]).append(',')
          .append(b.state[i]).append(',').append(b.count[i]).append(']');
    }
    return s.append(']').toString();
  }
}
