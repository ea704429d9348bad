"""A single-node Kafka broker for tests, run from Kafka's released jars (no Docker, no downloads).

`scripts/fetch_kafka.sh` (make setup-kafka) resolves the jars once into
`tests/kafka/kafka_broker/target/kafka-<version>/`; this module starts a combined
broker+controller (KRaft) from them on free loopback ports, runs the Java share-group driver
(`tests/kafka/kafka_broker/src/main/java/sharestate/broker/Driver.java`) and Kafka's
DumpLogSegments, and parses what DumpLogSegments prints.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tests.support.paths import ROOT

BROKER_DIR: Final = ROOT / "tests" / "kafka" / "kafka_broker"
#: The release the broker tests run; `make setup-kafka` fetches it.
DEFAULT_VERSION: Final = "4.4.0"
START_TIMEOUT_S: Final = 90.0
STOP_TIMEOUT_S: Final = 30.0

#: Broker settings every run uses (spec §8.2). The ports, log dir and `extra` come on top.
BASE_PROPERTIES: Final[dict[str, str]] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "2",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "5",
    # Small, so that both snapshots and updates are written.
    "share.coordinator.snapshot.update.records.per.snapshot": "3",
    # Cold-partition snapshots (4.1+) within the test's time; pruning off unless a test asks.
    "share.coordinator.cold.partition.snapshot.interval.ms": "4000",
    "share.coordinator.state.topic.prune.interval.ms": "3600000",
    "group.share.delivery.count.limit": "3",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "2000",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    # A 2-core machine shared with others.
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "share.coordinator.threads": "1",
    "group.coordinator.threads": "1",
}
JVM_OPTS: Final = ("-Xms256m", "-Xmx768m", "-XX:+UseSerialGC")

_LOG4J_BROKER: Final = """\
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""
_LOG4J_TOOLS: Final = """\
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
"""


class KafkaSetupMissing(Exception):
    """The Kafka jars were not fetched (`make setup-kafka`)."""


@dataclass(frozen=True)
class KafkaArtifacts:
    version: str
    classpath: str
    #: Classpath and main class of DumpLogSegments (4.3+: a separate build, dump-log/pom.xml).
    dump_log_classpath: str
    dump_log_main: str
    dump_log_version: str


def artifacts(version: str = DEFAULT_VERSION) -> KafkaArtifacts:
    """The fetched classpaths of one release, or `KafkaSetupMissing` naming the set-up step."""
    target = BROKER_DIR / "target" / f"kafka-{version}"
    classpath_file = target / "classpath.txt"
    if not (target / ".fetched").is_file() or not classpath_file.is_file():
        raise KafkaSetupMissing(
            f"Kafka {version} broker jars not fetched ({target} missing): run `make setup-kafka` "
            f"(bash scripts/fetch_kafka.sh {version}; needs Java 17 and Maven)"
        )
    classpath = f"{target / 'classes'}{os.pathsep}{classpath_file.read_text().strip()}"
    tools_file = target / "dump-log-version.txt"
    if tools_file.is_file():
        tools = tools_file.read_text().strip()
        tools_cp = BROKER_DIR / "dump-log" / "target" / f"tools-{tools}" / "classpath.txt"
        if not tools_cp.is_file():
            raise KafkaSetupMissing(f"{tools_cp} missing: run `make setup-kafka`")
        return KafkaArtifacts(
            version,
            classpath,
            tools_cp.read_text().strip(),
            "org.apache.kafka.tools.DumpLogSegments",
            tools,
        )
    return KafkaArtifacts(version, classpath, classpath, _dump_log_main(classpath), version)


def _dump_log_main(classpath: str) -> str:
    for entry in classpath.split(os.pathsep):
        if not entry.endswith(".jar") or "/kafka" not in entry:
            continue
        with zipfile.ZipFile(entry) as jar:
            names = set(jar.namelist())
        for main in ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments"):
            if main.replace(".", "/") + ".class" in names:
                return main
    raise KafkaSetupMissing("no DumpLogSegments class on the broker classpath")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def random_cluster_id() -> str:
    """A Kafka Uuid in its base64url form (what `kafka-storage random-uuid` prints)."""
    while True:
        text = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _tail(path: Path, lines: int = 40) -> str:
    if not path.is_file():
        return f"({path} not written)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def run_java(
    classpath: str,
    main: str,
    args: list[str],
    *,
    stdout: Path,
    stderr: Path,
    timeout: float,
    log4j: Path,
) -> None:
    """Run a Java main to completion (bounded); raise with the tail of its output on failure."""
    command = [
        "java",
        *JVM_OPTS,
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        classpath,
        main,
        *args,
    ]
    with stdout.open("wb") as out, stderr.open("wb") as err:
        try:
            code = subprocess.run(command, stdout=out, stderr=err, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{main} did not finish in {timeout}s; see {stdout}, {stderr}"
            ) from None
    if code != 0:
        raise AssertionError(
            f"{main} {' '.join(args[:3])}... exited {code}; see {stdout} and {stderr}:\n"
            + _tail(stderr)
        )


@dataclass
class Broker:
    """A combined broker+controller on loopback; `work` keeps data, config and logs."""

    kafka: KafkaArtifacts
    work: Path
    extra: Mapping[str, str] = field(default_factory=dict)
    port: int = 0
    controller_port: int = 0
    cluster_id: str = ""
    process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.work / "data"

    @property
    def log(self) -> Path:
        return self.work / "broker.log"

    @property
    def tools_log4j(self) -> Path:
        return self.work / "log4j2-tools.properties"

    def properties(self) -> dict[str, str]:
        props = dict(BASE_PROPERTIES)
        props.update(
            {
                "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
                "listeners": (
                    f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
                ),
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "log.dirs": str(self.data_dir),
            }
        )
        props.update(self.extra)
        return props

    def write_config(self) -> Path:
        self.work.mkdir(parents=True, exist_ok=True)
        (self.work / "log4j2-broker.properties").write_text(_LOG4J_BROKER)
        self.tools_log4j.write_text(_LOG4J_TOOLS)
        config = self.work / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        return config

    def format(self) -> None:
        """`kafka-storage.sh format` for a fresh data dir (static quorum of one voter)."""
        self.port, self.controller_port = free_port(), free_port()
        self.cluster_id = random_cluster_id()
        config = self.write_config()
        run_java(
            self.kafka.classpath,
            "kafka.tools.StorageTool",
            ["format", "-t", self.cluster_id, "-c", str(config)],
            stdout=self.work / "format.out",
            stderr=self.work / "format.err",
            timeout=60,
            log4j=self.tools_log4j,
        )

    def start(self, extra: Mapping[str, str] | None = None) -> None:
        """Start (or restart, with `extra` settings changed) and wait until it serves."""
        if extra is not None:
            self.extra = {**self.extra, **extra}
        if not self.data_dir.is_dir():
            self.format()
        config = self.write_config()
        command = [
            "java",
            *JVM_OPTS,
            f"-Dlog4j2.configurationFile={self.work / 'log4j2-broker.properties'}",
            "-cp",
            self.kafka.classpath,
            "kafka.Kafka",
            str(config),
        ]
        started = self._starts()
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"Kafka broker exited with {self.process.returncode} while starting; "
                    f"logs in {self.work}:\n{_tail(self.log)}"
                )
            if self._starts() > started and self._accepts():
                return
            time.sleep(0.3)
        self.stop()
        raise AssertionError(
            f"Kafka broker not up within {START_TIMEOUT_S}s; logs in {self.work}:\n"
            + _tail(self.log)
        )

    def restart(self, extra: Mapping[str, str]) -> None:
        self.stop()
        self.start(extra)

    def _starts(self) -> int:
        if not self.log.is_file():
            return 0
        return self.log.read_text(errors="replace").count("Kafka Server started")

    def _accepts(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM (Kafka's controlled shutdown), then SIGKILL after STOP_TIMEOUT_S."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    # ------------------------------------------------------------------ tools

    def run_driver(self, out: Path, *, seed: int, delivery_count_limit: int, lock_ms: int) -> Any:
        """Run the share-group scenario; returns its JSON (see Driver.java)."""
        run_java(
            self.kafka.classpath,
            "sharestate.broker.Driver",
            [self.bootstrap, str(out), str(seed), str(delivery_count_limit), str(lock_ms), "10000"],
            stdout=self.work / "driver.out",
            stderr=self.work / "driver.err",
            timeout=300,
            log4j=self.tools_log4j,
        )
        return json.loads(out.read_text())

    def run_workload(
        self,
        out: Path,
        *,
        topic: str,
        groups: int,
        consumers: int,
        rate: int,
        seconds: int,
        seed: int,
        delete: bool = False,
    ) -> Any:
        """A steady share-group workload (Workload.java): `rate` records a second to `topic`
        for `seconds`, read by `groups` share groups of `consumers`, deleted at the end with
        `delete`; its JSON. A new `seed` makes new groups, so it can run again on the same
        broker."""
        run_java(
            self.kafka.classpath,
            "sharestate.broker.Workload",
            [
                self.bootstrap,
                topic,
                str(groups),
                str(consumers),
                str(rate),
                str(seconds),
                str(seed),
                str(out),
                "delete" if delete else "keep",
            ],
            stdout=self.work / f"{out.stem}.out",
            stderr=self.work / f"{out.stem}.err",
            timeout=seconds + 300,
            log4j=self.tools_log4j,
        )
        return json.loads(out.read_text())

    def pruned_log_starts(self) -> dict[int, int]:
        """From the broker's log, where Kafka's DeleteRecords moved each `__share_group_state`
        partition's log start (the share coordinator's pruning): partition -> log start."""
        pattern = re.compile(
            r"UnifiedLog partition=__share_group_state-(\d+),.*"
            r"Incremented log start offset to (\d+)"
        )
        starts: dict[int, int] = {}
        for match in pattern.finditer(self.log.read_text(errors="replace")):
            starts[int(match[1])] = max(starts.get(int(match[1]), 0), int(match[2]))
        return starts

    def segment_files(self, topic: str) -> list[Path]:
        return sorted(self.data_dir.glob(f"{topic}-*/*.log"))

    def dump_log(self, topic: str, decoder: str, name: str) -> list[DumpedRecord]:
        """Kafka's DumpLogSegments with `decoder` over every segment of `topic`, parsed."""
        files = self.segment_files(topic)
        assert files, f"no segment files of {topic} under {self.data_dir}"
        stdout = self.work / f"{name}.txt"
        run_java(
            self.kafka.dump_log_classpath,
            self.kafka.dump_log_main,
            [decoder, "--files", ",".join(str(f) for f in files)],
            stdout=stdout,
            stderr=self.work / f"{name}.err",
            timeout=120,
            log4j=self.tools_log4j,
        )
        return parse_dump(stdout.read_text())


@dataclass(frozen=True)
class DumpedRecord:
    """One `| offset: ...` line of DumpLogSegments with a decoder."""

    partition: int
    offset: int
    create_time: int
    key_size: int
    value_size: int
    key: Any
    #: The decoded payload; None for `<DELETE>` (a tombstone).
    payload: Any
    line: str


_DUMPING = re.compile(r"^Dumping .*/(?P<topic>[^/]+)-(?P<partition>\d+)/\d+\.log$")
_RECORD = re.compile(
    r"^\| offset: (?P<offset>\d+) CreateTime: (?P<time>-?\d+) keySize: (?P<ks>-?\d+) "
    r"valueSize: (?P<vs>-?\d+) .*? key: (?P<rest>.*)$"
)


def parse_dump(text: str) -> list[DumpedRecord]:
    """Records of DumpLogSegments output (its decoders print the key and payload as JSON)."""
    records: list[DumpedRecord] = []
    partition = -1
    decoder = json.JSONDecoder()
    for line in text.splitlines():
        dumping = _DUMPING.match(line)
        if dumping:
            partition = int(dumping["partition"])
            continue
        match = _RECORD.match(line)
        if not match:
            continue
        key, end = decoder.raw_decode(match["rest"])
        rest = match["rest"][end:].strip()
        assert rest.startswith("payload: "), line
        payload_text = rest[len("payload: ") :]
        payload = None if payload_text == "<DELETE>" else json.loads(payload_text)
        records.append(
            DumpedRecord(
                partition,
                int(match["offset"]),
                int(match["time"]),
                int(match["ks"]),
                int(match["vs"]),
                key,
                payload,
                line,
            )
        )
    return records


def export_topic(spark: Any, bootstrap: str, topic: str) -> Any:
    """A user's batch export: Spark's Kafka source, every record, committed data only.
    Needs the consumer-based offset reader: Spark's default skips internal topics (see
    test_spark_default_offset_reader_skips_internal_topics)."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.isolation.level", "read_committed")
        .option("includeHeaders", "true")
        .load()
    )
