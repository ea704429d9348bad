"""What several test modules share: paths, Kafka's corpus readers, builders, the broker."""
