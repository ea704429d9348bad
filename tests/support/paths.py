"""Where the project and the Kafka test data are."""

from __future__ import annotations

from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent.parent
#: Records serialized by Kafka's own classes, per release (tests/kafka/kafka_harness/).
GOLDEN: Final = ROOT / "tests" / "kafka" / "golden"
#: Logs replayed by Kafka's own ShareCoordinatorShard, per release.
CORPUS: Final = ROOT / "tests" / "kafka" / "replay_corpus"
