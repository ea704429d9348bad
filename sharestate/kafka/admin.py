"""A small Kafka protocol client: a topic's partitions and leaders, and their offsets.

It stands in for the JVM AdminClient reached through Py4J, which a Spark Connect session does
not have: standard library only, blocking sockets, and one deadline for the whole call (every
connect, send and receive waits at most what is left of it, so a broker that accepts the
connection and never answers costs the deadline, not more).

Protocol versions: request header v1, response header v0, Metadata v8 and ListOffsets v5, the
newest *non-flexible* versions (int16-length strings, int32-count arrays, no tagged fields).
Kafka's message specs accept them from 3.0 (Metadata 0-11, ListOffsets 0-7) through 4.x
(Metadata 0-13, ListOffsets 1-11, request header 1-2): of what this module sends, 4.0's
removals (KIP-896) took only ListOffsets v0 and request header v0.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from sharestate.errors import DecodeError
from sharestate.kafka.wire import Reader, Writer

LIST_OFFSETS_API_KEY: Final = 2
LIST_OFFSETS_VERSION: Final = 5
METADATA_API_KEY: Final = 3
METADATA_VERSION: Final = 8
#: The client id in every request header (brokers log it and apply quotas by it).
CLIENT_ID: Final = "sharestate"
#: ListOffsets timestamps that ask for the log start offset and the end offset.
EARLIEST_TIMESTAMP: Final = -2
LATEST_TIMESTAMP: Final = -1
READ_UNCOMMITTED: Final = 0
READ_COMMITTED: Final = 1
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
#: The pause between rounds over the bootstrap addresses when none answered.
RETRY_BACKOFF_SECONDS: Final = 0.5
#: A size prefix above this is not a Metadata or ListOffsets answer for one topic.
MAX_RESPONSE_BYTES: Final = 64 << 20

#: Kafka's names (`Errors`) of the codes these two requests can meet.
ERROR_NAMES: Final[dict[int, str]] = {
    -1: "UNKNOWN_SERVER_ERROR",
    0: "NONE",
    1: "OFFSET_OUT_OF_RANGE",
    2: "CORRUPT_MESSAGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    5: "LEADER_NOT_AVAILABLE",
    6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT",
    8: "BROKER_NOT_AVAILABLE",
    9: "REPLICA_NOT_AVAILABLE",
    13: "NETWORK_EXCEPTION",
    17: "INVALID_TOPIC_EXCEPTION",
    29: "TOPIC_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED",
    35: "UNSUPPORTED_VERSION",
    42: "INVALID_REQUEST",
    43: "UNSUPPORTED_FOR_MESSAGE_FORMAT",
    56: "KAFKA_STORAGE_ERROR",
    74: "FENCED_LEADER_EPOCH",
    75: "UNKNOWN_LEADER_EPOCH",
    78: "OFFSET_NOT_AVAILABLE",
    100: "UNKNOWN_TOPIC_ID",
}

_I32 = struct.Struct(">i")


class KafkaAdminError(Exception):
    """Root of this module's errors (a malformed bootstrap list is one too)."""


class KafkaUnreachableError(KafkaAdminError):
    """No broker answered within the deadline (a bootstrap server, or a partition's leader)."""


class UnknownTopicError(KafkaAdminError):
    """The cluster has no such topic (error code 3, UNKNOWN_TOPIC_OR_PARTITION)."""


class KafkaProtocolError(KafkaAdminError):
    """A broker answered with an error code, or with bytes that are not the response asked for;
    `error_code` is Kafka's code, None for a malformed answer."""

    def __init__(self, message: str, error_code: int | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code


def describe_error(code: int) -> str:
    """`error code 6 (NOT_LEADER_OR_FOLLOWER)`; the name only where this module knows it."""
    name = ERROR_NAMES.get(code)
    return f"error code {code}" + (f" ({name})" if name else "")


@dataclass(frozen=True)
class BrokerAddress:
    """A broker as the cluster advertises it."""

    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"broker {self.node_id} at {self.host}:{self.port}"


@dataclass(frozen=True)
class PartitionMetadata:
    """One partition of a described topic."""

    partition: int
    #: None while the partition has no leader (`error_code` says why, e.g. LEADER_NOT_AVAILABLE).
    leader: BrokerAddress | None
    error_code: int = 0


@dataclass(frozen=True)
class TopicDescription:
    """A topic's partitions (ordered by index) with their leaders."""

    name: str
    internal: bool
    partitions: tuple[PartitionMetadata, ...]


@dataclass(frozen=True)
class PartitionOffsets:
    """A partition's log start offset and its end offset (the last stable offset when read
    committed)."""

    earliest: int
    latest: int


# ------------------------------------------------------------------------------- encoding


def _frame(api_key: int, version: int, correlation_id: int, body: Writer) -> bytes:
    """Size prefix, request header v1 (client id as an int16-length string), body."""
    header = Writer().int16(api_key).int16(version).int32(correlation_id).string(CLIENT_ID)
    payload = header.getvalue() + body.getvalue()
    return Writer().int32(len(payload)).raw(payload).getvalue()


def metadata_request(topic: str, correlation_id: int) -> bytes:
    """Metadata v8 for one topic, framed; never lets the broker create the topic."""
    body = (
        Writer()
        .int32(1)
        .string(topic)
        .int8(0)  # allow_auto_topic_creation: describing must not create
        .int8(0)  # include_cluster_authorized_operations
        .int8(0)  # include_topic_authorized_operations
    )
    return _frame(METADATA_API_KEY, METADATA_VERSION, correlation_id, body)


def list_offsets_request(
    topic: str,
    partitions: Sequence[int],
    timestamp: int,
    isolation_level: int,
    correlation_id: int,
) -> bytes:
    """ListOffsets v5 for some partitions of one topic at one timestamp (-2 earliest, -1
    latest), framed. One timestamp per request: a broker refuses a partition named twice."""
    body = Writer().int32(-1).int8(isolation_level).int32(1).string(topic).int32(len(partitions))
    for partition in partitions:
        # current_leader_epoch -1: no fencing, the leader was looked up just before.
        body.int32(partition).int32(-1).int64(timestamp)
    return _frame(LIST_OFFSETS_API_KEY, LIST_OFFSETS_VERSION, correlation_id, body)


# ------------------------------------------------------------------------------- decoding


def _count(reader: Reader, what: str, min_element_bytes: int) -> int:
    """A non-flexible array's int32 count, checked against the bytes left."""
    count = reader.int32(f"{what} count")
    if count < 0 or count * min_element_bytes > reader.remaining():
        raise DecodeError(f"impossible length: {what} claims {count} elements")
    return count


def _text(reader: Reader, what: str) -> str:
    return reader.string(what) or ""


def _end(reader: Reader, what: str) -> None:
    # Bytes left over mean another version's layout: better refused than half-read.
    if reader.remaining():
        raise DecodeError(f"{reader.remaining()} bytes after the {what}")


def parse_metadata_response(body: bytes, topic: str) -> TopicDescription:
    """`topic` from a Metadata v8 response body (after the response header).

    Raises `UnknownTopicError` for error code 3, `KafkaProtocolError` for any other error
    code of the topic, or for bytes that are not such a response.
    """
    try:
        reader = Reader(body)
        reader.int32("throttle_time_ms")
        brokers: dict[int, BrokerAddress] = {}
        for _ in range(_count(reader, "brokers", 12)):
            node_id = reader.int32("node_id")
            host = _text(reader, "host")
            port = reader.int32("port")
            reader.string("rack", nullable=True)
            brokers[node_id] = BrokerAddress(node_id, host, port)
        reader.string("cluster_id", nullable=True)
        reader.int32("controller_id")
        found: tuple[int, bool, list[PartitionMetadata]] | None = None
        for _ in range(_count(reader, "topics", 13)):
            error_code = reader.int16("topic error_code")
            name = _text(reader, "topic name")
            internal = reader.int8("is_internal") != 0
            partitions = []
            for _ in range(_count(reader, "partitions", 26)):
                partition_error = reader.int16("partition error_code")
                index = reader.int32("partition_index")
                leader_id = reader.int32("leader_id")
                reader.int32("leader_epoch")
                for nodes in ("replica_nodes", "isr_nodes", "offline_replicas"):
                    for _ in range(_count(reader, nodes, 4)):
                        reader.int32(nodes)
                # leader_id -1 (no leader) is in no broker list.
                partitions.append(PartitionMetadata(index, brokers.get(leader_id), partition_error))
            reader.int32("topic_authorized_operations")
            if name == topic:
                found = (error_code, internal, partitions)
        reader.int32("cluster_authorized_operations")
        _end(reader, "Metadata response")
    except DecodeError as err:
        raise KafkaProtocolError(
            f"malformed Metadata v{METADATA_VERSION} response: {err}"
        ) from None
    if found is None:
        raise KafkaProtocolError(f"the Metadata response does not mention topic {topic}")
    error_code, internal, partitions = found
    if error_code == UNKNOWN_TOPIC_OR_PARTITION:
        raise UnknownTopicError(f"the Kafka cluster has no topic {topic}")
    if error_code:
        raise KafkaProtocolError(
            f"Metadata of topic {topic}: {describe_error(error_code)}", error_code
        )
    ordered = tuple(sorted(partitions, key=lambda p: p.partition))
    return TopicDescription(topic, internal, ordered)


def parse_list_offsets_response(body: bytes, topic: str) -> dict[int, int]:
    """Partition -> offset from a ListOffsets v5 response body (after the response header).

    Raises `UnknownTopicError` for error code 3 on a partition, `KafkaProtocolError` for any
    other error code, or for bytes that are not such a response.
    """
    offsets: dict[int, int] = {}
    try:
        reader = Reader(body)
        reader.int32("throttle_time_ms")
        for _ in range(_count(reader, "topics", 6)):
            name = _text(reader, "topic name")
            for _ in range(_count(reader, "partitions", 26)):
                index = reader.int32("partition_index")
                error_code = reader.int16("error_code")
                reader.int64("timestamp")
                offset = reader.int64("offset")
                reader.int32("leader_epoch")
                if name != topic:
                    continue
                if error_code == UNKNOWN_TOPIC_OR_PARTITION:
                    raise UnknownTopicError(
                        f"the Kafka cluster has no partition {index} of topic {topic}"
                    )
                if error_code:
                    raise KafkaProtocolError(
                        f"ListOffsets of topic {topic} partition {index}: "
                        f"{describe_error(error_code)}",
                        error_code,
                    )
                offsets[index] = offset
        _end(reader, "ListOffsets response")
    except DecodeError as err:
        raise KafkaProtocolError(
            f"malformed ListOffsets v{LIST_OFFSETS_VERSION} response: {err}"
        ) from None
    return offsets


# ------------------------------------------------------------------------------ transport


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """`HOST:PORT[,HOST:PORT...]` (an IPv6 host in brackets) -> [(host, port)]."""
    addresses = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise KafkaAdminError(
                f"bad Kafka bootstrap address {item.strip()!r} in {bootstrap!r}: "
                "expected HOST:PORT[,HOST:PORT...]"
            )
        addresses.append((host, int(port)))
    return addresses


def _why(err: OSError) -> str:
    return str(err) or type(err).__name__


class _Connection:
    """One blocking TCP connection whose every operation waits at most until `deadline`
    (time.monotonic()). Connecting, sending and receiving raise OSError (TimeoutError when
    the deadline passes); an answer that is not a Kafka response raises KafkaProtocolError."""

    def __init__(self, host: str, port: int, deadline: float) -> None:
        self.address = f"{host}:{port}"
        self.deadline = deadline
        # Name resolution inside create_connection is not bounded by the timeout.
        self.sock = socket.create_connection((host, port), timeout=self._left())

    def __enter__(self) -> _Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        return left

    def _read(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            self.sock.settimeout(self._left())
            chunk = self.sock.recv(min(size - len(data), 1 << 16))
            if not chunk:
                # Also what a broker does with a request version it does not support.
                raise ConnectionError("the broker closed the connection without answering")
            data += chunk
        return bytes(data)

    def exchange(self, requests: Sequence[tuple[int, bytes]]) -> list[bytes]:
        """Send framed requests (correlation id, bytes) at once; return their response
        bodies, in order (a broker answers one connection's requests in order)."""
        self.sock.settimeout(self._left())
        # Since Python 3.5 the timeout bounds the whole sendall.
        self.sock.sendall(b"".join(frame for _, frame in requests))
        bodies = []
        for correlation_id, _ in requests:
            (size,) = _I32.unpack(self._read(4))
            if not 4 <= size <= MAX_RESPONSE_BYTES:
                raise KafkaProtocolError(
                    f"{self.address} answered a {size}-byte response: not a Kafka broker?"
                )
            payload = self._read(size)
            (answered,) = _I32.unpack_from(payload)
            if answered != correlation_id:
                raise KafkaProtocolError(
                    f"{self.address} answered correlation id {answered}, expected {correlation_id}"
                )
            bodies.append(payload[4:])
        return bodies


def _describe(
    bootstrap: str, topic: str, deadline: float, timeout_seconds: float
) -> TopicDescription:
    addresses = parse_bootstrap(bootstrap)
    failures: list[str] = []
    # Rounds over the addresses until the deadline, as Kafka's own clients retry: a broker
    # that is starting refuses connections for a moment before it answers.
    while time.monotonic() < deadline:
        failures = []
        for tried, (host, port) in enumerate(addresses):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            # An equal share of what is left: a server that accepts and never answers must
            # not take the time of the addresses after it.
            share_end = time.monotonic() + left / (len(addresses) - tried)
            try:
                with _Connection(host, port, share_end) as connection:
                    (body,) = connection.exchange([(1, metadata_request(topic, 1))])
            except OSError as err:
                failures.append(f"{host}:{port}: {_why(err)}")
                continue
            return parse_metadata_response(body, topic)
        time.sleep(max(0.0, min(RETRY_BACKOFF_SECONDS, deadline - time.monotonic())))
    raise KafkaUnreachableError(
        f"no Kafka broker answered at {bootstrap} within {timeout_seconds:g} s"
        + (f" ({'; '.join(failures)})" if failures else "")
    )


def describe_topic(bootstrap: str, topic: str, timeout_seconds: float) -> TopicDescription:
    """The partitions of `topic` and their leaders, asked of the first bootstrap server (in
    the comma-separated HOST:PORT list) that answers, within `timeout_seconds` in all.

    Raises `KafkaUnreachableError` when none answers in time, `UnknownTopicError` when the
    cluster has no such topic (it is never created), `KafkaProtocolError` for another error.
    """
    return _describe(bootstrap, topic, time.monotonic() + timeout_seconds, timeout_seconds)


def _leader_offsets(
    leader: BrokerAddress,
    topic: str,
    partitions: list[int],
    isolation_level: int,
    deadline: float,
    timeout_seconds: float,
) -> tuple[dict[int, int], dict[int, int]]:
    """(earliest, latest) offsets of the partitions `leader` leads: both requests on one
    connection."""
    requests = [
        (
            correlation_id,
            list_offsets_request(topic, partitions, timestamp, isolation_level, correlation_id),
        )
        for correlation_id, timestamp in ((1, EARLIEST_TIMESTAMP), (2, LATEST_TIMESTAMP))
    ]
    try:
        with _Connection(leader.host, leader.port, deadline) as connection:
            earliest, latest = connection.exchange(requests)
    except OSError as err:
        raise KafkaUnreachableError(
            f"{leader}, leader of topic {topic} partition(s) {partitions}, did not answer "
            f"within {timeout_seconds:g} s: {_why(err)}"
        ) from None
    answers = (
        parse_list_offsets_response(earliest, topic),
        parse_list_offsets_response(latest, topic),
    )
    for answer in answers:
        if missing := sorted(set(partitions) - set(answer)):
            raise KafkaProtocolError(
                f"{leader} left partition(s) {missing} of topic {topic} out of its answer"
            )
    return answers


def list_offsets(
    bootstrap: str, topic: str, timeout_seconds: float, *, read_committed: bool = True
) -> dict[int, PartitionOffsets]:
    """Every partition of `topic` -> its earliest (log start) and latest offset, the latest
    being the last stable offset when `read_committed` (what a read_committed consumer reads
    up to), else the high watermark. Partitions are looked up as `describe_topic` does, then
    each leader is asked for the partitions it leads; `timeout_seconds` bounds it all.

    Raises what `describe_topic` raises; `KafkaUnreachableError` also when a leader does not
    answer, `KafkaProtocolError` when a partition has no leader or a leader answers an error.
    """
    deadline = time.monotonic() + timeout_seconds
    description = _describe(bootstrap, topic, deadline, timeout_seconds)
    by_leader: dict[BrokerAddress, list[int]] = {}
    for meta in description.partitions:
        if meta.leader is None:
            why = f" ({describe_error(meta.error_code)})" if meta.error_code else ""
            raise KafkaProtocolError(
                f"partition {meta.partition} of topic {topic} has no leader now{why}",
                meta.error_code or None,
            )
        by_leader.setdefault(meta.leader, []).append(meta.partition)
    isolation_level = READ_COMMITTED if read_committed else READ_UNCOMMITTED
    offsets: dict[int, PartitionOffsets] = {}
    for leader, partitions in by_leader.items():
        earliest, latest = _leader_offsets(
            leader, topic, partitions, isolation_level, deadline, timeout_seconds
        )
        for partition in partitions:
            offsets[partition] = PartitionOffsets(earliest[partition], latest[partition])
    return dict(sorted(offsets.items()))
