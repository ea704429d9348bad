"""Kafka's replay corpus (tests/kafka/replay_corpus/, written by Kafka's ShareCoordinatorShard
through tests/kafka/kafka_harness/): where it is and how to read it."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

from tests.support.paths import CORPUS

RELEASES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())


def read_sequences(release: str) -> Iterator[dict[str, Any]]:
    with gzip.open(CORPUS / release / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


def hex_bytes(text: str | None) -> bytes | None:
    return None if text is None else bytes.fromhex(text)


def share_partition_key(row: dict[str, Any]) -> str:
    return f"{row['group_id']}|{row['topic_id']}|{row['partition']}"
