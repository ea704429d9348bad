"""`sharestate.io.brokers` against a real Kafka 4.4.0 broker (`make setup-kafka`; skipped
without it): a topic's partitions, an internal topic, a missing topic (not created by
asking), a bootstrap list whose first address does not answer, and a broker that starts
within the deadline. Where no broker answers: tests/pure/test_no_broker_answers.py."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sharestate.io.brokers import UnknownTopicError, topic_partitions
from sharestate.kafka.schemas import CONSUMER_OFFSETS_TOPIC
from tests.support.broker import (
    BASE_PROPERTIES,
    DEFAULT_VERSION,
    Broker,
    KafkaArtifacts,
    KafkaSetupMissing,
    artifacts,
    free_port,
)

TOPIC = "brokers-test"
PARTITIONS = 3


@pytest.fixture(scope="module")
def kafka() -> KafkaArtifacts:
    try:
        return artifacts(DEFAULT_VERSION)
    except KafkaSetupMissing as missing:
        pytest.skip(str(missing))


@pytest.fixture(scope="module")
def broker(kafka: KafkaArtifacts, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the module with TOPIC, and `__consumer_offsets` (made by the broker
    when a group first commits offsets)."""
    running = Broker(kafka, tmp_path_factory.mktemp("brokers-broker"))
    running.start()
    try:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        for created in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
            created.result(timeout=30)
        offsets = [TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)]
        committing = ConsumerGroupTopicPartitions("brokers-test-group", offsets)
        for committed in admin.alter_consumer_group_offsets([committing]).values():
            committed.result(timeout=60)
        yield running
    finally:
        running.stop()


def test_a_topic_and_its_partitions(broker: Broker) -> None:
    assert topic_partitions(broker.bootstrap, TOPIC, 10) == list(range(PARTITIONS))


def test_an_internal_topic(broker: Broker) -> None:
    partitions = int(BASE_PROPERTIES["offsets.topic.num.partitions"])
    assert topic_partitions(broker.bootstrap, CONSUMER_OFFSETS_TOPIC, 10) == list(range(partitions))


def test_a_missing_topic_is_named_and_not_created(broker: Broker) -> None:
    started = time.monotonic()
    with pytest.raises(UnknownTopicError) as raised:
        topic_partitions(broker.bootstrap, "no-such-topic", 10)
    assert str(raised.value) == (
        f"the Kafka cluster at {broker.bootstrap} has no topic no-such-topic"
    )
    # Answered, not waited for.
    assert time.monotonic() - started < 5
    listed = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert "no-such-topic" not in listed.topics
    assert TOPIC in listed.topics


def test_a_refused_first_address_is_skipped(broker: Broker) -> None:
    bootstrap = f"127.0.0.1:{free_port()},{broker.bootstrap}"
    assert topic_partitions(bootstrap, TOPIC, 10) == list(range(PARTITIONS))


def test_a_silent_first_address_takes_only_its_share(broker: Broker) -> None:
    """A server that accepts connections and never answers, first in the list: the broker
    after it is still asked within the deadline."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        bootstrap = f"127.0.0.1:{silent.getsockname()[1]},{broker.bootstrap}"
        started = time.monotonic()
        assert topic_partitions(bootstrap, TOPIC, 8) == list(range(PARTITIONS))
        assert time.monotonic() - started < 8


def test_a_broker_that_starts_within_the_deadline_is_answered(broker: Broker) -> None:
    """The first attempts meet a closed port; the broker then starts (same ports) and
    answers. Runs last: it restarts the module's broker."""
    broker.stop()
    starter = threading.Thread(target=lambda: (time.sleep(1.0), broker.start()))
    starter.start()
    try:
        assert topic_partitions(broker.bootstrap, TOPIC, 90) == list(range(PARTITIONS))
    finally:
        starter.join()
