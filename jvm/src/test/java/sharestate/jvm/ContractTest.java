package sharestate.jvm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.Locale;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;

/** The generated Contract (from sharestate/jvm/contract.py) and the checks built on it. */
class ContractTest {
  /** Every table class: WIDTH and one constant per column, each its column's position. */
  @Test
  void everyColumnHasItsPosition() throws Exception {
    assertEquals(Contract.TABLES.length, 6);
    for (String[] table : Contract.TABLES) {
      Class<?> type = Class.forName("sharestate.jvm.Contract$" + table[0]);
      StructType schema = Schemas.of((String) type.getDeclaredField("SCHEMA").get(null));
      StructField[] fields = schema.fields();
      assertEquals(fields.length, type.getDeclaredField("WIDTH").getInt(null), table[0]);
      int positions = 0;
      for (Field constant : type.getDeclaredFields()) {
        if (constant.getType() == int.class && Modifier.isStatic(constant.getModifiers())
            && !constant.getName().equals("WIDTH")) {
          int at = constant.getInt(null);
          assertEquals(fields[at].name().toUpperCase(Locale.ROOT), constant.getName(), table[0]);
          positions++;
        }
      }
      assertEquals(fields.length, positions, table[0]);
    }
  }

  @Test
  void probeReportsTheContract() throws Exception {
    JsonNode contract = TestData.json(Probe.contract());
    assertEquals(Contract.VERSION, Probe.version());
    assertEquals(Contract.VERSION, contract.get("version").asInt());
    assertEquals(Contract.TABLES.length, contract.get("tables").size());
    assertEquals("stored_state", contract.get("values").get("RecordType").get("SEED").asText());
    JsonNode history = contract.get("tables").get("History");
    assertEquals(Fold.HISTORY, Schemas.of(history.toString()));
  }

  @Test
  void decodedResultColumnsAreTheDecodersFields() {
    StructType output = DecodeShareState.OUTPUT;
    assertEquals("record_type", output.fields()[Contract.DecodeOutput.RESULT[0]].name());
    int last = Contract.DecodeOutput.RESULT[Contract.DecodeOutput.RESULT.length - 1];
    assertEquals("decode_error", output.fields()[last].name());
  }

  @Test
  void inputsAreFoundByNameAndTypeChecked() {
    StructType expected = new StructType()
        .add("partition", DataTypes.IntegerType)
        .add("offset", DataTypes.LongType);
    StructType input = new StructType()
        .add("offset", DataTypes.LongType, false)
        .add("extra", DataTypes.StringType)
        .add("partition", DataTypes.IntegerType);
    assertArrayEquals(new int[] {2, 0}, Schemas.positions("T", input, expected));

    StructType retyped = new StructType()
        .add("partition", DataTypes.LongType)
        .add("offset", DataTypes.LongType);
    IllegalArgumentException wrong = assertThrows(IllegalArgumentException.class,
        () -> Schemas.positions("T", retyped, expected));
    assertEquals("T: input column partition is bigint, expected int", wrong.getMessage());

    StructType missing = new StructType().add("offset", DataTypes.LongType);
    IllegalArgumentException absent = assertThrows(IllegalArgumentException.class,
        () -> Schemas.positions("T", missing, expected));
    assertTrue(absent.getMessage().contains("no column partition"), absent.getMessage());
  }

  @Test
  void theFoldTakesItsInputInAnyOrder() {
    StructType input = Fold.INPUT;
    StructField[] reversed = input.fields().clone();
    java.util.Collections.reverse(java.util.Arrays.asList(reversed));
    int[] positions = Schemas.positions("Fold", new StructType(reversed), input);
    assertEquals(input.length() - 1, positions[Contract.FoldInput.GROUP_ID]);
    assertEquals(0, positions[input.length() - 1]);
  }
}
