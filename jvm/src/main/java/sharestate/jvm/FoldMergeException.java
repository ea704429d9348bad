package sharestate.jvm;

/** State batches Kafka's combiner cannot merge; the message is the row's replay_error. */
final class FoldMergeException extends Exception {
  private static final long serialVersionUID = 1L;

  FoldMergeException(String message) {
    super(message, null, false, false);
  }
}
