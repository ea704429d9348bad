package sharestate.jvm;

/** Lets Python check that the jar is on the driver's class path (sharestate.jvm). */
public final class Probe {
  private Probe() {}

  /** Bumped when a fast path's contract with the Python side changes. */
  public static int version() {
    return 4;
  }
}
