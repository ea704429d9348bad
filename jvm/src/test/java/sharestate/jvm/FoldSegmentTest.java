package sharestate.jvm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.api.Test;
import sharestate.jvm.Contract.DeliveryState;

/** FoldSegment (one share-partition's state in the fold) and FoldBatches. */
class FoldSegmentTest {
  private static final int AVAILABLE = DeliveryState.AVAILABLE;
  private static final int ACKNOWLEDGED = DeliveryState.ACKNOWLEDGED;
  private static final int ARCHIVED = DeliveryState.ARCHIVED;

  static FoldBatches batches(long[]... rows) {
    FoldBatches b = new FoldBatches();
    for (long[] r : rows) {
      b.add(r[0], r[1], (int) r[2], (int) r[3]);
    }
    return b;
  }

  static FoldSegment segment(int major, int minor) {
    FoldSegment s = new FoldSegment(major, minor, new FoldCombiner());
    s.reset();
    return s;
  }

  static FoldBatches copy(FoldBatches b) {
    FoldBatches c = new FoldBatches();
    c.copyFrom(b);
    return c;
  }

  @Test
  void snapshotThenUpdatesAsKafka44() throws FoldMergeException {
    FoldSegment s = segment(4, 4);
    s.start(true, 10, 1, 2, 3, 100L, 200L, null,
        batches(new long[] {10, 14, ACKNOWLEDGED, 1}, new long[] {15, 19, AVAILABLE, 1}));
    assertTrue(s.hasState);
    assertEquals(Integer.valueOf(-1), s.deliveryCompleteCount); // 4.2+: unknown is -1
    assertEquals(Long.valueOf(100), s.createTimestamp);
    assertEquals(15, s.effectiveStartOffset()); // 10-14 acknowledged
    assertEquals(5, s.counts[ACKNOWLEDGED]);
    assertEquals(5, s.counts[AVAILABLE]);

    // start -1 and leader -1 keep theirs; the sweep splits the available batch.
    s.update(-1, -1, 7, batches(new long[] {15, 17, ARCHIVED, 1}));
    assertEquals("[[10,14,2,1],[15,17,4,1],[18,19,0,1]]", TestData.text(s.batches));
    assertEquals(10, s.startOffset);
    assertEquals(2, s.leaderEpoch);
    assertEquals(Integer.valueOf(7), s.deliveryCompleteCount);
    assertEquals(18, s.effectiveStartOffset());
    assertArrayEquals(new long[] {2, 0, 5, 0, 3}, s.counts);

    // A start offset prunes what lies before it.
    s.update(12, 4, null, batches());
    assertEquals("[[12,14,2,1],[15,17,4,1],[18,19,0,1]]", TestData.text(s.batches));
    assertEquals(4, s.leaderEpoch);
    assertEquals(Integer.valueOf(-1), s.deliveryCompleteCount);
    assertArrayEquals(new long[] {2, 0, 3, 0, 3}, s.counts);

    s.delete();
    assertFalse(s.hasState);
    assertEquals(0, s.batches.size);
  }

  @Test
  void anUpdateWithoutStateStartsOneAsEachReleaseDoes() throws FoldMergeException {
    FoldBatches one = batches(new long[] {0, 4, AVAILABLE, 1});
    FoldSegment early = segment(4, 0); // Kafka 4.0: epoch -1, no timestamps, no DCC
    early.start(false, 0, 9, 1, 0, 5L, 6L, 3, copy(one));
    assertEquals(-1, early.stateEpoch);
    assertNull(early.createTimestamp);
    assertNull(early.writeTimestamp);
    assertNull(early.deliveryCompleteCount);

    FoldSegment later = segment(4, 1); // 4.1: epoch 0, timestamps 0, still no DCC
    later.start(false, 0, 9, 1, 0, 5L, 6L, 3, copy(one));
    assertEquals(0, later.stateEpoch);
    assertEquals(Long.valueOf(0), later.createTimestamp);
    assertNull(later.deliveryCompleteCount);

    FoldSegment seeded = segment(4, 4); // a stored state is taken as it is
    seeded.seed(3, 9, 1, 2, 5L, 6L, null, copy(one));
    assertEquals(9, seeded.stateEpoch);
    assertNull(seeded.deliveryCompleteCount);
    assertEquals(5, seeded.counts[AVAILABLE]);
  }

  @Test
  void batchesEndingBeforeTheyStartAreAnErrorThatChangesNothing() throws FoldMergeException {
    FoldSegment s = segment(4, 4);
    s.start(true, 0, 1, 1, 0, 0L, 0L, null, batches(new long[] {0, 9, AVAILABLE, 1}));
    FoldMergeException e = assertThrows(FoldMergeException.class,
        () -> s.update(-1, -1, null, batches(new long[] {30, 25, AVAILABLE, 1},
            new long[] {3, 8, ACKNOWLEDGED, 1})));
    assertTrue(e.getMessage().contains("before it starts"), e.getMessage());
    assertEquals("[[0,9,0,1]]", TestData.text(s.batches));
  }

  /**
   * On a canonical state, an update re-sweeps only the batches it overlaps or touches: the
   * result must be the full merge's (the combiner's), on random states and updates.
   */
  @Test
  void windowedMergeEqualsTheFullMerge() throws FoldMergeException {
    Random random = new Random(932);
    FoldCombiner combiner = new FoldCombiner();
    for (int round = 0; round < 2000; round++) {
      FoldSegment s = segment(4, 4);
      FoldBatches initial = new FoldBatches();
      long at = random.nextInt(20);
      for (int i = random.nextInt(8); i > 0; i--) {
        long last = at + random.nextInt(6);
        initial.add(at, last, random.nextInt(5), 1 + random.nextInt(3));
        at = last + 1 + random.nextInt(3);
      }
      FoldBatches state = new FoldBatches();
      combiner.combine(initial, new FoldBatches(), -1, true, state); // canonical
      s.start(true, 0, 1, 1, 0, 0L, 0L, null, copy(state));
      assertTrue(s.canonical, TestData.text(state)); // so the update takes the windowed path
      FoldBatches update = new FoldBatches();
      for (int i = 1 + random.nextInt(3); i > 0; i--) {
        long first = random.nextInt(60);
        update.add(first, first + random.nextInt(8), random.nextInt(5), 1 + random.nextInt(3));
      }
      long start = random.nextInt(4) == 0 ? random.nextInt(40) : -1;
      FoldBatches expected = new FoldBatches();
      combiner.combine(state, update, start == -1 ? s.startOffset : start, true, expected);
      s.update(start, -1, null, copy(update));
      String where = "round " + round + ": " + TestData.text(state) + " + "
          + TestData.text(update) + " from " + start;
      assertEquals(TestData.text(expected), TestData.text(s.batches), where);
      long[] counts = new long[s.counts.length];
      for (int i = 0; i < expected.size; i++) {
        counts[expected.state[i]] += expected.last[i] - expected.first[i] + 1;
      }
      assertArrayEquals(counts, s.counts, where);
    }
  }

  @Test
  void batchesGrowSpliceAndRemove() {
    FoldBatches b = new FoldBatches();
    for (int i = 0; i < 20; i++) { // past the initial capacity
      b.add(10L * i, 10L * i + 4, i % 5, 1);
    }
    assertEquals(20, b.size);
    b.splice(2, 5, batches(new long[] {20, 49, 2, 2}));
    assertEquals(18, b.size);
    assertEquals("[0,4,0,1]", TestData.text(b).substring(1, 10));
    assertEquals(20, b.first[2]);
    assertEquals(49, b.last[2]);
    assertEquals(50, b.first[3]);
    b.removeRange(0, 2);
    assertEquals(16, b.size);
    assertEquals(20, b.first[0]);
    b.insertAt(0);
    b.set(0, 1, 2, 3, 4);
    assertEquals(17, b.size);
    assertEquals("[[1,2,3,4],[20,49,2,2],", TestData.text(b).substring(0, 23));
  }
}
