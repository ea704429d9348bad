"""The pure-Python Kafka client (`sharestate.kafka.admin`): its requests field by field, its
decoding of hand-built responses, its deadline against servers that never answer, a fake
two-broker cluster (one ListOffsets request per leader), and a real Kafka 4.4.0 broker
(`make setup-kafka`; those tests are skipped without it).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sharestate.kafka.admin import (
    CLIENT_ID,
    KafkaAdminError,
    KafkaProtocolError,
    KafkaUnreachableError,
    PartitionOffsets,
    UnknownTopicError,
    describe_topic,
    list_offsets,
    list_offsets_request,
    metadata_request,
    parse_bootstrap,
    parse_list_offsets_response,
    parse_metadata_response,
)
from sharestate.kafka.schemas import CONSUMER_OFFSETS_TOPIC
from sharestate.kafka.wire import Reader, Writer
from tests.support.broker import (
    BASE_PROPERTIES,
    DEFAULT_VERSION,
    Broker,
    KafkaArtifacts,
    KafkaSetupMissing,
    artifacts,
    free_port,
    run_java,
)

NO_AUTH_OPS = -(1 << 31)

# ---------------------------------------------------------------------------- requests


def _header(frame: bytes) -> tuple[Reader, tuple[int, int, int, str | None]]:
    """The request header v1 of a framed request, checking the size prefix."""
    reader = Reader(frame)
    assert reader.int32("size") == len(frame) - 4
    header = (
        reader.int16("api_key"),
        reader.int16("api_version"),
        reader.int32("correlation_id"),
        reader.string("client_id", nullable=True),
    )
    return reader, header


def test_metadata_request_fields() -> None:
    reader, header = _header(metadata_request("my-topic", 7))
    assert header == (3, 8, 7, CLIENT_ID)
    assert reader.int32("topics") == 1
    assert reader.string("name") == "my-topic"
    assert reader.int8("allow_auto_topic_creation") == 0
    assert reader.int8("include_cluster_authorized_operations") == 0
    assert reader.int8("include_topic_authorized_operations") == 0
    assert reader.remaining() == 0


def test_list_offsets_request_fields() -> None:
    reader, header = _header(list_offsets_request("t", [0, 2], -1, 1, 9))
    assert header == (2, 5, 9, CLIENT_ID)
    assert reader.int32("replica_id") == -1
    assert reader.int8("isolation_level") == 1
    assert reader.int32("topics") == 1
    assert reader.string("name") == "t"
    assert reader.int32("partitions") == 2
    for partition in (0, 2):
        assert reader.int32("partition_index") == partition
        assert reader.int32("current_leader_epoch") == -1
        assert reader.int64("timestamp") == -1
    assert reader.remaining() == 0


def test_bootstrap_list() -> None:
    assert parse_bootstrap("a:1, b.example:9092,[::1]:9093") == [
        ("a", 1),
        ("b.example", 9092),
        ("::1", 9093),
    ]
    for bad in ("localhost", "host:port", ":9092", "a:1,", "a:70000"):
        with pytest.raises(KafkaAdminError, match="bad Kafka bootstrap address"):
            parse_bootstrap(bad)


# ---------------------------------------------------------------------------- responses

Partition = tuple[int, int, int]  # (index, leader id, error code)


def metadata_body(
    brokers: list[tuple[int, str, int]], topics: list[tuple[int, str, bool, list[Partition]]]
) -> bytes:
    """A Metadata v8 response body, laid out from Kafka's MetadataResponse.json."""
    out = Writer().int32(0).int32(len(brokers))
    for node_id, host, port in brokers:
        out.int32(node_id).string(host).int32(port).string(None)
    out.string("cluster-id").int32(1).int32(len(topics))
    for error_code, name, internal, partitions in topics:
        out.int16(error_code).string(name).int8(int(internal)).int32(len(partitions))
        for index, leader_id, partition_error in partitions:
            out.int16(partition_error).int32(index).int32(leader_id).int32(4)
            out.int32(1).int32(leader_id)  # replica_nodes
            out.int32(1).int32(leader_id)  # isr_nodes
            out.int32(0)  # offline_replicas
        out.int32(NO_AUTH_OPS)  # topic_authorized_operations
    return out.int32(NO_AUTH_OPS).getvalue()  # cluster_authorized_operations


def list_offsets_body(topic: str, partitions: list[tuple[int, int, int]]) -> bytes:
    """A ListOffsets v5 response body: (index, error code, offset) per partition."""
    out = Writer().int32(0).int32(1).string(topic).int32(len(partitions))
    for index, error_code, offset in partitions:
        out.int32(index).int16(error_code).int64(-1).int64(offset).int32(3)
    return out.getvalue()


def test_metadata_response_decoded() -> None:
    body = metadata_body(
        [(1, "k1", 9092), (2, "k2", 9093)],
        [
            (0, "other", False, [(0, 1, 0)]),
            # Partition 0 has lost its leader (LEADER_NOT_AVAILABLE, leader id -1).
            (0, "t", True, [(1, 2, 0), (0, -1, 5), (2, 1, 0)]),
        ],
    )
    described = parse_metadata_response(body, "t")
    assert described.name == "t"
    assert described.internal
    assert [(p.partition, p.error_code) for p in described.partitions] == [(0, 5), (1, 0), (2, 0)]
    leaders = [p.leader for p in described.partitions]
    assert leaders[0] is None
    assert leaders[1] is not None and (leaders[1].node_id, leaders[1].host) == (2, "k2")
    assert leaders[2] is not None and (leaders[2].host, leaders[2].port) == ("k1", 9092)


def test_metadata_response_errors() -> None:
    with pytest.raises(UnknownTopicError, match="no topic t$"):
        parse_metadata_response(metadata_body([], [(3, "t", False, [])]), "t")
    with pytest.raises(KafkaProtocolError, match=r"error code 29 \(TOPIC_AUTHORIZATION_FAILED\)"):
        parse_metadata_response(metadata_body([], [(29, "t", False, [])]), "t")
    with pytest.raises(KafkaProtocolError, match=r"error code 4242$") as raised:
        parse_metadata_response(metadata_body([], [(4242, "t", False, [])]), "t")
    assert raised.value.error_code == 4242
    with pytest.raises(KafkaProtocolError, match="does not mention topic t"):
        parse_metadata_response(metadata_body([], []), "t")
    whole = metadata_body([(1, "k1", 9092)], [(0, "t", False, [(0, 1, 0)])])
    with pytest.raises(KafkaProtocolError, match="malformed Metadata v8 response: truncated"):
        parse_metadata_response(whole[:-3], "t")
    with pytest.raises(KafkaProtocolError, match="2 bytes after"):
        parse_metadata_response(whole + b"\0\0", "t")


def test_list_offsets_response_decoded() -> None:
    body = list_offsets_body("t", [(0, 0, 17), (3, 0, 0)])
    assert parse_list_offsets_response(body, "t") == {0: 17, 3: 0}
    with pytest.raises(
        KafkaProtocolError, match=r"partition 3: error code 6 \(NOT_LEADER_OR_FOLLOWER\)"
    ) as raised:
        parse_list_offsets_response(list_offsets_body("t", [(0, 0, 17), (3, 6, -1)]), "t")
    assert raised.value.error_code == 6
    with pytest.raises(UnknownTopicError, match="no partition 1 of topic t"):
        parse_list_offsets_response(list_offsets_body("t", [(1, 3, -1)]), "t")
    with pytest.raises(KafkaProtocolError, match="malformed ListOffsets v5"):
        parse_list_offsets_response(body[:10], "t")


# ---------------------------------------------------------------------------- deadlines


def test_silent_server_costs_the_deadline() -> None:
    """A server that accepts connections (the kernel does, from the backlog) and never
    answers: unreachable within the deadline, the address and the timeout named."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        for call in (describe_topic, list_offsets):
            started = time.monotonic()
            with pytest.raises(KafkaUnreachableError) as raised:
                call(address, "t", 1.5)
            assert time.monotonic() - started < 1.5 + 2
            assert address in str(raised.value)
            assert "1.5 s" in str(raised.value)
            assert "timed out" in str(raised.value)


def test_closed_port_is_tried_until_the_deadline() -> None:
    """A refused connection is tried again (a broker that is starting refuses for a moment),
    until the deadline, then named."""
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(KafkaUnreachableError, match=f"no Kafka broker answered at {address}"):
        describe_topic(address, "t", 2)
    assert 2 <= time.monotonic() - started < 4


def test_a_broker_that_starts_within_the_deadline_is_answered() -> None:
    """The first attempts meet a closed port; the broker then starts and answers."""
    port = free_port()
    answered: list[FakeBroker] = []

    def start_later() -> None:
        time.sleep(1.0)
        answer = metadata_body([(1, "127.0.0.1", port)], [(0, "t", False, [(0, 1, 0)])])
        answered.append(FakeBroker(lambda api_key, body: answer, port=port))

    starter = threading.Thread(target=start_later)
    starter.start()
    try:
        described = describe_topic(f"127.0.0.1:{port}", "t", 10)
    finally:
        starter.join()
        for broker in answered:
            broker.close()
    assert described.name == "t"


# ---------------------------------------------------------------------------- a fake cluster


class FakeBroker:
    """A loopback server answering each request with `answer(api_key, body)`; it keeps the
    requests it read as (api_key, api_version, body)."""

    def __init__(self, answer: Callable[[int, bytes], bytes], port: int = 0) -> None:
        self.answer = answer
        self.requests: list[tuple[int, int, bytes]] = []
        self.server = socket.create_server(("127.0.0.1", port))
        self.server.settimeout(0.1)
        self.port: int = self.server.getsockname()[1]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                connection, _ = self.server.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(5)
                while frame := self._frame(connection):
                    reader = Reader(frame)
                    api_key, version = reader.int16("api_key"), reader.int16("api_version")
                    correlation_id = reader.int32("correlation_id")
                    reader.string("client_id", nullable=True)
                    body = frame[reader.pos :]
                    self.requests.append((api_key, version, body))
                    reply = Writer().int32(correlation_id).raw(self.answer(api_key, body))
                    payload = reply.getvalue()
                    connection.sendall(Writer().int32(len(payload)).raw(payload).getvalue())

    @staticmethod
    def _frame(connection: socket.socket) -> bytes | None:
        data = b""
        size = 4
        while len(data) < size:
            chunk = connection.recv(size - len(data))
            if not chunk:
                return None
            data += chunk
            if size == 4 and len(data) == 4:
                size = 4 + int.from_bytes(data, "big")
        return data[4:]

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(5)
        self.server.close()


def read_list_offsets_request(body: bytes) -> tuple[int, str, list[tuple[int, int]]]:
    """(isolation level, topic, [(partition, timestamp)]) of a ListOffsets v5 request body."""
    reader = Reader(body)
    assert reader.int32("replica_id") == -1
    isolation = reader.int8("isolation_level")
    assert reader.int32("topics") == 1
    topic = reader.string("name") or ""
    asked = []
    for _ in range(reader.int32("partitions")):
        partition = reader.int32("partition_index")
        assert reader.int32("current_leader_epoch") == -1
        asked.append((partition, reader.int64("timestamp")))
    assert reader.remaining() == 0
    return isolation, topic, asked


def _offsets_answer(api_key: int, body: bytes) -> bytes:
    """ListOffsets: 100 * partition for earliest, + 50 + isolation level for latest."""
    assert api_key == 2
    isolation, topic, asked = read_list_offsets_request(body)
    return list_offsets_body(
        topic, [(p, 0, 100 * p + (0 if ts == -2 else 50 + isolation)) for p, ts in asked]
    )


def test_list_offsets_asks_each_leader_for_its_partitions() -> None:
    """Partitions 0 and 2 led by broker 1, 1 by broker 2: each leader gets one request per
    timestamp, for its own partitions only."""
    second = FakeBroker(_offsets_answer)
    first = FakeBroker(
        lambda api_key, body: (
            metadata_body(
                [(1, "127.0.0.1", first.port), (2, "127.0.0.1", second.port)],
                [(0, "t", False, [(0, 1, 0), (1, 2, 0), (2, 1, 0)])],
            )
            if api_key == 3
            else _offsets_answer(api_key, body)
        )
    )
    try:
        committed = list_offsets(f"127.0.0.1:{first.port}", "t", 10)
        uncommitted = list_offsets(f"127.0.0.1:{first.port}", "t", 10, read_committed=False)
    finally:
        first.close()
        second.close()
    assert committed == {p: PartitionOffsets(100 * p, 100 * p + 51) for p in range(3)}
    assert uncommitted == {p: PartitionOffsets(100 * p, 100 * p + 50) for p in range(3)}
    assert [(k, v) for k, v, _ in first.requests] == [(3, 8), (2, 5), (2, 5)] * 2
    assert [(k, v) for k, v, _ in second.requests] == [(2, 5), (2, 5)] * 2
    asked_first = [read_list_offsets_request(b)[2] for k, _, b in first.requests if k == 2]
    asked_second = [read_list_offsets_request(b)[2] for _, _, b in second.requests]
    assert asked_first == [[(0, -2), (2, -2)], [(0, -1), (2, -1)]] * 2
    assert asked_second == [[(1, -2)], [(1, -1)]] * 2


def test_list_offsets_refuses_a_partition_without_leader() -> None:
    fake = FakeBroker(
        lambda api_key, body: metadata_body([(1, "127.0.0.1", 1)], [(0, "t", False, [(0, -1, 5)])])
    )
    try:
        with pytest.raises(
            KafkaProtocolError, match=r"partition 0 of topic t has no leader now \(error code 5 "
        ):
            list_offsets(f"127.0.0.1:{fake.port}", "t", 5)
    finally:
        fake.close()


# ---------------------------------------------------------------------------- a real broker

TOPIC = "admin-test"
#: Records the seed program produces per partition of TOPIC (committed, non-transactional)...
PRODUCED = {0: 10, 1: 20, 2: 30}
#: ...and in a transaction it leaves open on partition 0: the last stable offset stays at 10.
OPEN_TRANSACTION = 5

#: Run as a single-file source program on the broker's classpath: creates TOPIC, produces
#: PRODUCED, commits a group's offsets three times (which creates __consumer_offsets and writes
#: to it), then leaves a transaction open and exits at once, before anything could end it.
SEED_JAVA = """
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

public class Seed {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        Properties producing = new Properties();
        producing.putAll(common);
        producing.put("key.serializer", StringSerializer.class.getName());
        producing.put("value.serializer", StringSerializer.class.getName());
        try (Admin admin = Admin.create(common);
             KafkaProducer<String, String> producer = new KafkaProducer<>(producing)) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
            for (int partition = 0; partition < 3; partition++) {
                for (int i = 0; i < 10 * (partition + 1); i++) {
                    producer.send(new ProducerRecord<>(topic, partition, null, "v" + i));
                }
            }
            producer.flush();
            for (int commit = 1; commit <= 3; commit++) {
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (int partition = 0; partition < 3; partition++) {
                    offsets.put(new TopicPartition(topic, partition),
                        new OffsetAndMetadata(commit));
                }
                admin.alterConsumerGroupOffsets("admin-test-group", offsets).all().get();
            }
        }
        producing.put("transactional.id", "admin-test-open");
        producing.put("transaction.timeout.ms", "600000");
        KafkaProducer<String, String> open = new KafkaProducer<>(producing);
        open.initTransactions();
        open.beginTransaction();
        for (int i = 0; i < Integer.parseInt(args[2]); i++) {
            open.send(new ProducerRecord<>(topic, 0, null, "open" + i));
        }
        open.flush();
        Runtime.getRuntime().halt(0);
    }
}
"""


@pytest.fixture(scope="module")
def kafka() -> KafkaArtifacts:
    try:
        return artifacts(DEFAULT_VERSION)
    except KafkaSetupMissing as missing:
        pytest.skip(str(missing))


@pytest.fixture(scope="module")
def broker(kafka: KafkaArtifacts, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the module, seeded by SEED_JAVA."""
    running = Broker(kafka, tmp_path_factory.mktemp("admin-broker"))
    running.start()
    try:
        source = running.work / "Seed.java"
        source.write_text(SEED_JAVA)
        run_java(
            kafka.classpath,
            str(source),
            [running.bootstrap, TOPIC, str(OPEN_TRANSACTION)],
            stdout=running.work / "seed.out",
            stderr=running.work / "seed.err",
            timeout=120,
            log4j=running.tools_log4j,
        )
        yield running
    finally:
        running.stop()


def test_describe_consumer_offsets(broker: Broker) -> None:
    described = describe_topic(broker.bootstrap, CONSUMER_OFFSETS_TOPIC, 10)
    assert described.internal
    partitions = int(BASE_PROPERTIES["offsets.topic.num.partitions"])
    assert [p.partition for p in described.partitions] == list(range(partitions))
    for p in described.partitions:
        assert p.error_code == 0
        assert p.leader is not None
        assert (p.leader.node_id, f"{p.leader.host}:{p.leader.port}") == (1, broker.bootstrap)


def test_describe_missing_topic(broker: Broker) -> None:
    with pytest.raises(UnknownTopicError, match="no topic no-such-topic"):
        describe_topic(broker.bootstrap, "no-such-topic", 10)
    # Not created by asking (the request does not allow it).
    with pytest.raises(UnknownTopicError):
        describe_topic(broker.bootstrap, "no-such-topic", 10)


def test_bootstrap_skips_an_address_that_does_not_answer(broker: Broker) -> None:
    described = describe_topic(f"127.0.0.1:{free_port()},{broker.bootstrap}", TOPIC, 10)
    assert [p.partition for p in described.partitions] == [0, 1, 2]
    assert not described.internal


def test_list_offsets_committed_and_not(broker: Broker) -> None:
    """The end offsets are the records produced; read committed stops at the open
    transaction (the last stable offset), read uncommitted at the high watermark."""
    committed = list_offsets(broker.bootstrap, TOPIC, 10)
    assert committed == {p: PartitionOffsets(0, n) for p, n in PRODUCED.items()}
    uncommitted = list_offsets(broker.bootstrap, TOPIC, 10, read_committed=False)
    assert uncommitted[0] == PartitionOffsets(0, PRODUCED[0] + OPEN_TRANSACTION)
    assert {p: o for p, o in uncommitted.items() if p} == {p: o for p, o in committed.items() if p}


def test_list_offsets_consumer_offsets_match_dump_log(broker: Broker, tmp_path: Path) -> None:
    """Each `__consumer_offsets` partition ends one past the last record DumpLogSegments
    prints; the group's offset commits put records in at least one."""
    offsets = list_offsets(broker.bootstrap, CONSUMER_OFFSETS_TOPIC, 10)
    assert sorted(offsets) == list(range(int(BASE_PROPERTIES["offsets.topic.num.partitions"])))
    assert all(0 <= o.earliest <= o.latest for o in offsets.values())
    dumped = broker.dump_log(CONSUMER_OFFSETS_TOPIC, "--offsets-decoder", "admin-offsets")
    last: dict[int, int] = {}
    for record in dumped:
        last[record.partition] = max(last.get(record.partition, -1), record.offset)
    assert last, "the seed's offset commits wrote no __consumer_offsets record"
    assert {p: o.latest for p, o in offsets.items() if o.latest} == {
        p: offset + 1 for p, offset in last.items()
    }
