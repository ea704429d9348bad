package sharestate.jvm;

import java.io.Serializable;
import java.util.ArrayList;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.storage.RDDBlockId;
import org.apache.spark.storage.StorageLevel;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * Rows that one pass over a partition computes anyway, handed to a sibling RDD as its cached
 * block for that partition.
 *
 * <p>Spark computes each action from its inputs: a step whose output feeds two tables (the
 * fold: every history row, and each share-partition's last row, the state; the decode: decoded
 * rows, and the rows it leaves to the Python decoder) runs again for the second. The sibling
 * is an ordinary persisted RDD over the same parent, computing its rows itself. When the main
 * pass has gone through a whole partition, it stores the sibling's rows for that partition as
 * the sibling's cached block ({@code RDDBlockId(sibling, partition)}); a sibling task then
 * reads the block, as it reads any cached partition, instead of computing again. Where the
 * block is missing (the main pass has not finished that partition, was stopped early, or the
 * block was evicted or lost with an executor), Spark computes the sibling's partition itself:
 * the same rows, only slower. Spark's scheduler sees the blocks and runs sibling tasks where
 * they are; unpersisting the sibling (or the context cleaner, once it is unreachable) drops
 * them.
 */
public final class Tee implements Serializable {
  private static final long serialVersionUID = 1L;
  /** Serialized: a deserialized block is sized by walking every object in it, which cost more
   * than the fold's whole output row. */
  static final StorageLevel LEVEL = StorageLevel.MEMORY_AND_DISK_SER();

  private static final ClassTag<InternalRow> ROW = ClassTag$.MODULE$.apply(InternalRow.class);
  private final int siblingId;

  /** Persists {@code sibling}, whose blocks the main pass's sinks will store. */
  Tee(JavaRDD<InternalRow> sibling) {
    sibling.persist(LEVEL);
    siblingId = sibling.id();
  }

  /** The sink of partition {@code partition} of the main pass. */
  Sink sink(int partition) {
    return new Sink(RDDBlockId.apply(siblingId, partition));
  }

  /** How many partitions of the sibling Spark holds (left by the main pass or computed). */
  public int cachedPartitions() {
    RDD<?> sibling = sibling();
    if (sibling == null) {
      return 0;
    }
    int held = 0;
    for (int i = 0, n = sibling.getNumPartitions(); i < n; i++) {
      if (SparkEnv.get().blockManager().master().contains(RDDBlockId.apply(siblingId, i))) {
        held++;
      }
    }
    return held;
  }

  private RDD<?> sibling() {
    return SparkContext.getOrCreate().getPersistentRDDs().get(siblingId).getOrElse(() -> null);
  }

  /** Drops the sibling's blocks (python: when the tables that read it are written). */
  public void release() {
    RDD<?> sibling = sibling();
    if (sibling != null) {
      sibling.unpersist(false);
    }
  }

  /** Collects one partition's sibling rows while the main pass runs over it. */
  static final class Sink {
    private final RDDBlockId block;
    private final ArrayList<InternalRow> rows = new ArrayList<>();
    private boolean finished;

    Sink(RDDBlockId block) {
      this.block = block;
    }

    /** A row of the sibling's partition; the caller hands over a row nothing else reuses. */
    void add(InternalRow row) {
      rows.add(row);
    }

    /** The main pass went through the whole partition: store the rows as the sibling's block
     * (a no-op if the sibling computed that block itself already). */
    void finish() {
      if (finished) {
        return;
      }
      finished = true;
      SparkEnv.get()
          .blockManager()
          .putIterator(block, CollectionConverters.asScala(rows.iterator()), LEVEL, true, ROW);
      rows.clear();
    }
  }
}
