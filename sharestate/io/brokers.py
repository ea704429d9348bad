"""Asking the cluster of a `kafka://` input whether it has a topic, within a deadline.

Spark's Kafka source retries a broker that does not answer without end, and a Spark Connect
client has no JVM to ask one: this process asks first, with confluent-kafka (librdkafka), an
optional dependency (`pip install 'sharestate[kafka]'`). Only a Metadata request for one
topic is sent; it never creates the topic.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final

log = logging.getLogger("sharestate")

#: What to install when confluent-kafka is missing.
INSTALL_HINT: Final = "pip install 'sharestate[kafka]'"
#: The client id brokers log and apply quotas by.
CLIENT_ID: Final = "sharestate"
#: librdkafka's longest pause between connection attempts (10 s by default): a broker that
#: is starting refuses connections for a moment, and should be found soon after it is up.
RECONNECT_BACKOFF_MAX_MS: Final = 1000
#: librdkafka's error names that mean no broker answered (in time).
_UNREACHABLE: Final = frozenset({"_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "_RESOLVE"})


class BrokerError(Exception):
    """Root of this module's errors (a malformed bootstrap list is one too)."""


class KafkaClientMissingError(BrokerError):
    """confluent-kafka is not installed."""


class KafkaUnreachableError(BrokerError):
    """No broker answered within the deadline."""


class UnknownTopicError(BrokerError):
    """The cluster has no such topic."""


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """`HOST:PORT[,HOST:PORT...]` (an IPv6 host in brackets) -> [(host, port)].

    Checked here because librdkafka takes `host:abc` as port 0 and retries it until the
    deadline: a typo is better named at once."""
    addresses = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise BrokerError(
                f"bad Kafka bootstrap address {item.strip()!r} in {bootstrap!r}: "
                "expected HOST:PORT[,HOST:PORT...]"
            )
        addresses.append((host, int(port)))
    return addresses


class _Failures:
    """librdkafka's log, kept instead of printed: by default it prints every failed
    connection attempt to stderr, where a refused run says one line. The last connection
    failure goes into the error."""

    def __init__(self) -> None:
        self.last: str | None = None

    def log(self, level: int, fmt: str, *args: Any) -> None:
        # confluent-kafka calls it as logging.Logger.log: "%s [%s] %s", facility, client, text.
        log.debug("librdkafka: " + fmt, *args)
        if len(args) == 3 and args[0] == "FAIL":
            self.last = str(args[2]).split("]: ", 1)[-1]


def topic_partitions(bootstrap: str, topic: str, timeout_seconds: float) -> Sequence[int]:
    """The partition indexes of `topic`, asked of the cluster at `bootstrap` (comma-separated
    HOST:PORT), within `timeout_seconds` in all.

    Raises `KafkaClientMissingError` without confluent-kafka, `KafkaUnreachableError` when no
    broker answers in time, `UnknownTopicError` when the cluster has no such topic,
    `BrokerError` for another error (a malformed address, a topic the cluster refuses to
    describe)."""
    addresses = parse_bootstrap(bootstrap)
    try:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient
    except ImportError:
        raise KafkaClientMissingError(
            f"asking a Kafka cluster needs confluent-kafka, which this Python lacks: {INSTALL_HINT}"
        ) from None
    failures = _Failures()
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "client.id": CLIENT_ID,
            "allow.auto.create.topics": False,
            "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS,
            # An equal share of the deadline per address (librdkafka's floor is 1 s): a server
            # that accepts connections and never answers must not take the others' time.
            "socket.connection.setup.timeout.ms": max(
                1000, int(timeout_seconds * 1000 / len(addresses))
            ),
        },
        logger=failures,
    )
    try:
        metadata = admin.list_topics(topic=topic, timeout=timeout_seconds)
    except KafkaException as err:
        error = err.args[0]
        if error.name() not in _UNREACHABLE:
            raise BrokerError(f"Metadata of topic {topic} at {bootstrap}: {error.str()}") from None
        admin.poll(0)  # serves the queued log lines to `failures`
        why = f" ({failures.last})" if failures.last else ""
        raise KafkaUnreachableError(
            f"no Kafka broker answered at {bootstrap} within {timeout_seconds:g} s{why}"
        ) from None
    described = metadata.topics.get(topic)
    if described is None or (
        described.error is not None and described.error.name() == "UNKNOWN_TOPIC_OR_PART"
    ):
        raise UnknownTopicError(f"the Kafka cluster at {bootstrap} has no topic {topic}")
    if described.error is not None:
        raise BrokerError(f"Metadata of topic {topic} at {bootstrap}: {described.error.str()}")
    return sorted(described.partitions)
