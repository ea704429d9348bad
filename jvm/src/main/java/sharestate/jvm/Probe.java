package sharestate.jvm;

/**
 * Lets Python check that the jar is on the driver's class path and was built from the row
 * contract it speaks (sharestate.jvm.contract, rendered into Contract.java at build time).
 */
public final class Probe {
  private Probe() {}

  /** sharestate.jvm.contract.VERSION when the jar was built. */
  public static int version() {
    return Contract.VERSION;
  }

  /** sharestate.jvm.contract.fingerprint() when the jar was built: a digest of the tables. */
  public static String fingerprint() {
    return Contract.FINGERPRINT;
  }

  /**
   * The contract this jar was built from, as sharestate.jvm.contract.as_json() gives it:
   * {"version": n, "tables": {name: Spark schema JSON}, "values": {...}}, each schema as the
   * JVM parses it.
   */
  public static String contract() {
    StringBuilder json = new StringBuilder();
    json.append("{\"version\":").append(Contract.VERSION).append(",\"tables\":{");
    for (int i = 0; i < Contract.TABLES.length; i++) {
      String[] table = Contract.TABLES[i];
      json.append(i == 0 ? "" : ",").append('"').append(table[0]).append("\":");
      json.append(Schemas.of(table[1]).json());
    }
    return json.append("},\"values\":").append(Contract.VALUES).append('}').toString();
  }
}
