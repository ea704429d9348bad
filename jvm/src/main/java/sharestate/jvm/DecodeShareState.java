package sharestate.jvm;

import java.util.Arrays;
import java.util.Iterator;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.StructType;
import sharestate.jvm.Contract.DecodeInput;
import sharestate.jvm.Contract.DecodeOutput;

/**
 * The JVM fast tier of the `__share_group_state` decoder (the Python side is
 * `sharestate.decode.spark.decode_share_state`; the reference is `sharestate.kafka.records`).
 *
 * <p>Every row comes out once. A row this tier is sure of is decoded exactly as the reference
 * decodes it; every other row (malformed in any way, unknown tags, malformed UTF-8 in the group
 * id, an update tombstone, ...) comes out with {@code needs_reference = true}, its decoded
 * columns null and its key and value kept, for the Python reference decoder to decode or
 * quarantine with its reason. Quarantine reasons therefore still come from one place.
 */
public final class DecodeShareState {
  private DecodeShareState() {}

  /** Input columns, in order (sharestate.decode.columns.DECODE_INPUT_FIELDS). */
  static final StructType INPUT = Schemas.of(Contract.DecodeInput.SCHEMA);

  /** Output columns, in order: the decode step's columns plus the needs_reference flag. */
  static final StructType OUTPUT = Schemas.of(Contract.DecodeOutput.SCHEMA);

  /**
   * Decode exported rows, as two tiers over one RDD of the input (with adaptive execution,
   * turning a plan into an RDD runs its shuffles, an export's deduplication, there and then;
   * two separate RDDs would run them twice).
   *
   * <p>The first holds every row, decoded or flagged {@code needs_reference}. The second holds
   * the flagged rows as they came in (key, value, partition, offset, timestamp), for the Python
   * reference to decode. The first pass hands them to the second through a {@link Tee} (the
   * third element; release it when done): once the first has gone through a partition, the
   * second reads that partition's flagged rows from Spark's block manager instead of parsing
   * the input again; where the first has not, the second parses it itself (without building
   * decoded columns).
   *
   * @param rows a DataFrame with columns key, value (binary), partition (int), offset (long),
   *     timestamp (timestamp); other columns are ignored
   * @param layoutsCsv the layouts to try in order, as `share_state_layouts` returns them, e.g.
   *     "4.2,4.0" for auto-detection or "4.1"
   * @param schemaJson the first tier's schema as Spark JSON (Python derives it from the Arrow
   *     schema, so both decoders hand Spark the same types); it must be {@link #OUTPUT}, the
   *     schema this jar was built for
   * @return {decoded, flagged, tee}
   */
  public static Object[] tiers(Dataset<Row> rows, String layoutsCsv, String schemaJson) {
    StructType schema = Schemas.of(schemaJson);
    if (!schema.equals(OUTPUT)) {
      throw new IllegalArgumentException(
          "DecodeShareState: output schema "
              + schema.json()
              + ", expected "
              + OUTPUT.json()
              + " (columns, types and nullability)");
    }
    String[] layouts = DecodeParser.checkLayouts(layoutsCsv);
    Dataset<Row> input = checkedInput(rows);
    org.apache.spark.sql.classic.Dataset<Row> classic =
        (org.apache.spark.sql.classic.Dataset<Row>) input;
    SparkSession session = classic.sparkSession();
    JavaRDD<InternalRow> in = classic.queryExecution().toRdd().toJavaRDD();
    JavaRDD<InternalRow> flagged = in.mapPartitions(new Flagged(layouts, input.schema()));
    Tee tee = new Tee(flagged);
    JavaRDD<InternalRow> decoded =
        in.mapPartitionsWithIndex(new Body(layouts, input.schema(), tee), false);
    return new Object[] {
      session.internalCreateDataFrame(decoded.rdd(), schema, false),
      session.internalCreateDataFrame(flagged.rdd(), input.schema(), false),
      tee,
    };
  }

  /** The input columns, in order (the positions of Contract.DecodeInput), types checked. */
  private static Dataset<Row> checkedInput(Dataset<Row> rows) {
    String[] names = INPUT.fieldNames();
    Dataset<Row> input = rows.select(names[0], Arrays.copyOfRange(names, 1, names.length));
    Schemas.positions("DecodeShareState", input.schema(), INPUT);
    return input;
  }

  /**
   * Copies input rows that are kept: input rows are reused (and Java serialization writes a
   * reused object again as a reference to its first copy), and a columnar scan's own row copy
   * drops binary columns to null (ColumnarBatchRow.copy); a flat row's copy keeps every byte.
   */
  static UnsafeProjection flatCopier(StructType schema) {
    return UnsafeProjection.create(schema);
  }

  /**
   * mapPartitions body of the flagged tier: input rows the parser is not sure of, copied (they
   * are kept: the tier is persisted, see {@link Tee}).
   */
  static final class Flagged implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
    private static final long serialVersionUID = 1L;
    private final String[] layouts;
    private final StructType inputSchema;

    Flagged(String[] layouts, StructType inputSchema) {
      this.layouts = layouts.clone();
      this.inputSchema = inputSchema;
    }

    @Override
    public Iterator<InternalRow> call(Iterator<InternalRow> rows) {
      DecodeParser parser = new DecodeParser(layouts);
      UnsafeProjection flat = flatCopier(inputSchema);
      return new Iterator<InternalRow>() {
        private InternalRow next;

        @Override
        public boolean hasNext() {
          while (next == null && rows.hasNext()) {
            InternalRow row = rows.next();
            byte[] key = DecodeWriter.bytes(row, DecodeInput.KEY);
            byte[] value = DecodeWriter.bytes(row, DecodeInput.VALUE);
            if (!parser.parse(key, value)) {
              next = flat.apply(row).copy();
            }
          }
          return next != null;
        }

        @Override
        public InternalRow next() {
          if (!hasNext()) {
            throw new java.util.NoSuchElementException();
          }
          InternalRow row = next;
          next = null;
          return row;
        }
      };
    }
  }

  /**
   * mapPartitionsWithIndex body: one writer (reused buffers) per partition; the input rows it
   * flags go to the flagged tier through the tee.
   */
  static final class Body
      implements Function2<Integer, Iterator<InternalRow>, Iterator<InternalRow>> {
    private static final long serialVersionUID = 1L;
    private final String[] layouts;
    private final StructType inputSchema;
    private final Tee tee;

    Body(String[] layouts, StructType inputSchema, Tee tee) {
      this.layouts = layouts.clone();
      this.inputSchema = inputSchema;
      this.tee = tee;
    }

    @Override
    public Iterator<InternalRow> call(Integer partition, Iterator<InternalRow> rows) {
      DecodeWriter writer = new DecodeWriter(layouts);
      Tee.Sink flagged = tee.sink(partition);
      UnsafeProjection flat = flatCopier(inputSchema);
      return new Iterator<InternalRow>() {
        @Override
        public boolean hasNext() {
          if (rows.hasNext()) {
            return true;
          }
          flagged.finish();
          return false;
        }

        @Override
        public InternalRow next() {
          InternalRow in = rows.next();
          UnsafeRow out = writer.decode(in);
          if (out.getBoolean(DecodeOutput.NEEDS_REFERENCE)) {
            flagged.add(flat.apply(in).copy());
          }
          return out;
        }
      };
    }
  }

}
