package sharestate.jvm;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The contract's schemas ({@code Contract}, generated from sharestate/jvm/contract.py at build
 * time) as Spark types, and the check of an input against one.
 */
final class Schemas {
  private Schemas() {}

  /** A table's schema from its JSON ({@code Contract.<Table>.SCHEMA}). */
  static StructType of(String json) {
    return (StructType) DataType.fromJson(json);
  }

  /**
   * Where each column of {@code expected} is in {@code input}, in the order of {@code
   * expected}: {@code positions[Contract.<Table>.COLUMN]} is the column's ordinal in the
   * input. A missing column, or one of another type (nullability aside: Spark widens it in
   * unions), is an IllegalArgumentException that names it.
   */
  static int[] positions(String who, StructType input, StructType expected) {
    StructField[] fields = expected.fields();
    int[] positions = new int[fields.length];
    for (int i = 0; i < fields.length; i++) {
      String name = fields[i].name();
      scala.Option<Object> at = input.getFieldIndex(name);
      if (at.isEmpty()) {
        throw new IllegalArgumentException(who + ": input has no column " + name);
      }
      positions[i] = (Integer) at.get();
      String got = input.fields()[positions[i]].dataType().catalogString();
      String want = fields[i].dataType().catalogString();
      if (!got.equals(want)) {
        throw new IllegalArgumentException(
            who + ": input column " + name + " is " + got + ", expected " + want);
      }
    }
    return positions;
  }
}
