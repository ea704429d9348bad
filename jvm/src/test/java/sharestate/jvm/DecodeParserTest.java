package sharestate.jvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** DecodeParser on Kafka's golden __share_group_state records (tests/kafka/golden/). */
class DecodeParserTest {
  static List<String> releases() throws IOException {
    return TestData.releases("golden");
  }

  static List<JsonNode> golden(String release) throws IOException {
    return TestData.jsonLines(TestData.kafka("golden").resolve(release)
        .resolve("share_group_state.jsonl"));
  }

  /** The layout a release writes (sharestate.kafka.records.share_state_layouts). */
  static String layoutOf(String release) {
    String[] parts = release.split("\\.");
    int major = Integer.parseInt(parts[0]);
    int minor = Integer.parseInt(parts[1]);
    if (major == 4 && minor <= 1) {
      return "4." + minor;
    }
    return "4.2";
  }

  @ParameterizedTest
  @MethodSource("releases")
  void goldenRecordsParseToKafkasFields(String release) throws IOException {
    String layout = layoutOf(release);
    DecodeParser parser = new DecodeParser(new String[] {layout});
    List<JsonNode> records = golden(release);
    assertTrue(records.size() > 300, release);
    for (JsonNode record : records) {
      String where = release + " " + record.get("case").asText();
      byte[] key = TestData.hex(record.get("key_hex"));
      byte[] value = TestData.hex(record.get("value_hex"));
      assertTrue(parser.parse(key, value), where);
      assertParsed(record, parser, where);
      if (!parser.tombstone) {
        assertEquals(layout, DecodeParser.LAYOUT_NAMES[parser.outputLayout()], where);
      }
    }
  }

  /** The parser's fields are Kafka's JSON rendering of the record. */
  static void assertParsed(JsonNode record, DecodeParser p, String where) {
    JsonNode key = record.get("key");
    JsonNode keyData = key.get("data");
    assertEquals(key.get("type").asInt(), p.recordType, where);
    String group = new String(p.key, p.groupAt, p.groupLength, StandardCharsets.UTF_8);
    assertEquals(keyData.get("groupId").asText(), group, where);
    byte[] topic = Arrays.copyOfRange(p.key, p.topicAt, p.topicAt + 16);
    String topicId = Base64.getUrlEncoder().withoutPadding().encodeToString(topic);
    assertEquals(keyData.get("topicId").asText(), topicId, where);
    assertEquals(keyData.get("partition").asInt(), p.partition, where);
    JsonNode value = record.get("value");
    assertEquals(value.isNull(), p.tombstone, where);
    if (value.isNull()) {
      return;
    }
    JsonNode data = value.get("data");
    assertEquals(data.get("snapshotEpoch").asInt(), p.snapshotEpoch, where);
    assertEquals(data.get("leaderEpoch").asInt(), p.leaderEpoch, where);
    assertEquals(data.get("startOffset").asLong(), p.startOffset, where);
    if (p.recordType == DecodeParser.SNAPSHOT) {
      assertEquals(data.get("stateEpoch").asInt(), p.stateEpoch, where);
      if (data.has("createTimestamp")) {
        assertEquals(data.get("createTimestamp").asLong(), p.createTimestamp, where);
        assertEquals(data.get("writeTimestamp").asLong(), p.writeTimestamp, where);
      }
    }
    // Kafka leaves DeliveryCompleteCount out of the JSON and the bytes at its default (-1).
    assertEquals(data.has("deliveryCompleteCount"), p.hasDcc, where);
    if (p.hasDcc) {
      assertEquals(data.get("deliveryCompleteCount").asInt(), p.dcc, where);
    }
    JsonNode batches = data.get("stateBatches");
    assertEquals(batches.size(), p.batchCount, where);
    for (int i = 0; i < p.batchCount; i++) {
      JsonNode b = batches.get(i);
      assertEquals(b.get("firstOffset").asLong(), p.firstOffsets[i], where);
      assertEquals(b.get("lastOffset").asLong(), p.lastOffsets[i], where);
      assertEquals(b.get("deliveryState").asInt(), p.deliveryStates[i], where);
      assertEquals(b.get("deliveryCount").asInt(), p.deliveryCounts[i], where);
    }
  }

  /** The first golden record of a release whose value satisfies the test, and its bytes. */
  static JsonNode first(String release, java.util.function.Predicate<JsonNode> test)
      throws IOException {
    return golden(release).stream().filter(test).findFirst().orElseThrow();
  }

  static boolean isSnapshot(JsonNode r) {
    return r.get("key").get("type").asInt() == 0 && !r.get("value").isNull()
        && r.get("value").get("data").get("stateBatches").size() > 0;
  }

  @Test
  void autoDetectionNamesATaglessRecordAsTheReferenceDoes() throws IOException {
    // Both 4.1 and 4.2 layouts parse a tagless 4.1 snapshot: the reference names it 4.1.
    JsonNode record = first("4.1.2", DecodeParserTest::isSnapshot);
    DecodeParser auto = new DecodeParser(DecodeParser.checkLayouts("4.2, 4.0"));
    byte[] key = TestData.hex(record.get("key_hex"));
    assertTrue(auto.parse(key, TestData.hex(record.get("value_hex"))));
    assertEquals("4.1", DecodeParser.LAYOUT_NAMES[auto.outputLayout()]);
    assertParsed(record, auto, "auto");
  }

  @Test
  void anythingInDoubtIsLeftToTheReference() throws IOException {
    JsonNode record = first("4.4.0", DecodeParserTest::isSnapshot);
    byte[] key = TestData.hex(record.get("key_hex"));
    byte[] value = TestData.hex(record.get("value_hex"));
    DecodeParser parser = new DecodeParser(new String[] {"4.2"});
    assertTrue(parser.parse(key, value));

    assertFalse(parser.parse(key, Arrays.copyOf(value, value.length - 1)), "truncated");
    assertFalse(parser.parse(key, Arrays.copyOf(value, value.length + 1)), "trailing byte");
    byte[] version1 = value.clone();
    version1[1] = 1;
    assertFalse(parser.parse(key, version1), "unknown value version");
    assertFalse(parser.parse(null, value), "no key");
    assertFalse(parser.parse(Arrays.copyOf(key, 3), value), "short key");
    byte[] otherType = key.clone();
    otherType[1] = 2;
    assertFalse(parser.parse(otherType, value), "not a share-state record type");
    byte[] update = key.clone();
    update[1] = 1;
    assertFalse(parser.parse(update, null), "an update tombstone");
    assertTrue(parser.parse(key, null), "a snapshot key's tombstone");
    assertTrue(parser.tombstone);

    // The closing tagged section (0 fields) replaced by one unknown tag (5, 0 bytes).
    assertEquals(0, value[value.length - 1]);
    byte[] tagged = Arrays.copyOf(value, value.length + 2);
    tagged[value.length - 1] = 1;
    tagged[value.length] = 5;
    tagged[value.length + 1] = 0;
    assertFalse(parser.parse(key, tagged), "an unknown tagged field");

    int groupLength = ((key[2] & 0xff) << 8) | (key[3] & 0xff);
    assertTrue(groupLength >= 1);
    byte[] malformed = key.clone();
    malformed[4] = (byte) 0xc0; // an overlong UTF-8 lead byte
    assertFalse(parser.parse(malformed, value), "malformed UTF-8 in the group id");
  }

  @Test
  void layoutsAreChecked() {
    assertEquals(List.of("4.2", "4.0"), Arrays.asList(DecodeParser.checkLayouts("4.2, 4.0")));
    assertThrows(IllegalArgumentException.class, () -> DecodeParser.checkLayouts("4.2,3.9"));
  }

  @Test
  void wellFormedUtf8IsWhatBothDecodersAccept() {
    byte[] ok = "grüppe-ß-组-\uD83D\uDE00".getBytes(StandardCharsets.UTF_8);
    assertTrue(DecodeParser.wellFormedUtf8(ok, 0, ok.length));
    byte[][] bad = {
      {(byte) 0xc0, (byte) 0x80}, // overlong NUL
      {(byte) 0xed, (byte) 0xa0, (byte) 0x80}, // a surrogate
      {(byte) 0xf4, (byte) 0x90, (byte) 0x80, (byte) 0x80}, // above U+10FFFF
      {(byte) 0xe4, (byte) 0xb8}, // cut short
      {(byte) 0xff},
    };
    for (byte[] b : bad) {
      assertFalse(DecodeParser.wellFormedUtf8(b, 0, b.length), Arrays.toString(b));
    }
  }
}
