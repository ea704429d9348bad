"""Asking a `kafka://` input's cluster for its topic (`sharestate.io.brokers`) where no broker
answers: refused within the deadline in one line naming the address, nothing printed by
librdkafka; and without confluent-kafka, one line saying what to install. The answers of a
real broker are in tests/kafka/test_broker_answers.py."""

from __future__ import annotations

import socket
import sys
import time

import pytest

from sharestate.errors import InputError
from sharestate.io.brokers import (
    INSTALL_HINT,
    BrokerError,
    KafkaClientMissingError,
    KafkaUnreachableError,
    parse_bootstrap,
    topic_partitions,
)
from sharestate.io.exports import wait_for_topic
from tests.support.broker import free_port


def test_bootstrap_lists_are_checked_before_any_connection() -> None:
    assert parse_bootstrap("a:1, [::1]:9092,b:65535") == [("a", 1), ("::1", 9092), ("b", 65535)]
    for bad in ("a", "a:", ":9092", "a:abc", "a:0", "a:65536", "a:1,,b:2"):
        started = time.monotonic()
        with pytest.raises(BrokerError, match="bad Kafka bootstrap address"):
            topic_partitions(bad, "t", 30)
        assert time.monotonic() - started < 1


def test_a_closed_port_is_refused_after_the_deadline(capfd: pytest.CaptureFixture[str]) -> None:
    """Tried until the deadline (a broker that is starting refuses for a moment), then named
    with librdkafka's last connection failure; its log is not printed."""
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(KafkaUnreachableError) as raised:
        topic_partitions(address, "t", 2)
    assert 2 <= time.monotonic() - started < 4
    message = str(raised.value)
    assert message.startswith(f"no Kafka broker answered at {address} within 2 s (")
    assert "Connection refused" in message
    assert "\n" not in message
    printed = capfd.readouterr()
    assert (printed.out, printed.err) == ("", "")


def test_a_silent_server_costs_the_deadline() -> None:
    """A server that accepts connections (the kernel does, from the backlog) and never
    answers: unreachable within the deadline, the address and the timeout named."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(KafkaUnreachableError, match=f"at {address} within 1.5 s"):
            topic_partitions(address, "t", 1.5)
        assert time.monotonic() - started < 1.5 + 2


def test_the_input_is_named_with_the_address() -> None:
    with pytest.raises(InputError) as raised:
        wait_for_topic(None, "kafka://127.0.0.1:1", "t", 1)  # type: ignore[arg-type]
    assert str(raised.value).startswith(
        "kafka://127.0.0.1:1: no Kafka broker answered at 127.0.0.1:1 within 1 s (--kafka-timeout)"
    )
    with pytest.raises(InputError, match="^kafka://h:x: cannot reach topic t at h:x: bad Kafka"):
        wait_for_topic(None, "kafka://h:x", "t", 1)  # type: ignore[arg-type]


def test_without_confluent_kafka_the_line_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # None in sys.modules makes `import confluent_kafka` raise ImportError.
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    monkeypatch.setitem(sys.modules, "confluent_kafka.admin", None)
    started = time.monotonic()
    with pytest.raises(KafkaClientMissingError):
        topic_partitions("127.0.0.1:1", "t", 30)
    with pytest.raises(InputError) as raised:
        wait_for_topic(None, "kafka://127.0.0.1:1", "t", 30)  # type: ignore[arg-type]
    assert time.monotonic() - started < 1
    assert str(raised.value) == (
        "kafka://127.0.0.1:1: asking a Kafka cluster needs confluent-kafka, which this Python "
        f"lacks: {INSTALL_HINT}"
    )
    assert INSTALL_HINT == "pip install 'sharestate[kafka]'"
