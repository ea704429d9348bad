package sharestate.jvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * FoldCombiner against each release's own PersisterStateBatchCombiner: every case of
 * tests/kafka/replay_corpus/{release}/combiner.jsonl.gz (about 4,000 each).
 */
class FoldCombinerTest {
  static List<String> releases() throws IOException {
    return TestData.releases("replay_corpus");
  }

  /** Kafka 4.4+ merges by a sweep, earlier releases pairwise (sharestate.replay.combiner). */
  static boolean sweeps(String release) {
    String[] parts = release.split("\\.");
    int major = Integer.parseInt(parts[0]);
    return major > 4 || (major == 4 && Integer.parseInt(parts[1]) >= 4);
  }

  @ParameterizedTest
  @MethodSource("releases")
  void combinesAsKafkaDoes(String release) throws IOException {
    boolean sweep = sweeps(release);
    FoldCombiner combiner = new FoldCombiner(); // reused, as the fold reuses it
    FoldBatches out = new FoldBatches();
    List<JsonNode> cases =
        TestData.jsonLines(TestData.kafka("replay_corpus").resolve(release)
            .resolve("combiner.jsonl.gz"));
    int failures = 0;
    for (JsonNode c : cases) {
      String where = release + " " + c.get("case").asText();
      FoldBatches current = TestData.batches(c.get("current"));
      FoldBatches incoming = TestData.batches(c.get("new"));
      long start = c.get("start_offset").asLong();
      if (c.get("result").isNull()) { // Kafka's combiner threw on this input
        failures++;
        assertThrows(FoldMergeException.class,
            () -> combiner.combine(current, incoming, start, sweep, out), where);
        continue;
      }
      try {
        combiner.combine(current, incoming, start, sweep, out);
      } catch (FoldMergeException e) {
        throw new AssertionError(where + ": " + e.getMessage(), e);
      }
      assertEquals(c.get("result").toString(), TestData.text(out), where);
    }
    assertTrue(cases.size() > 4000, release);
    assertTrue(failures < 10, release);
  }
}
