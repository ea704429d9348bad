"""The JVM fast paths (jar built from jvm/ by scripts/build_jvm.sh) and how to call them.

The Python modules are the reference; the JVM classes compute the same columns faster and
are tested equal to them (and to Kafka's own corpus). A session without the jar, or one
that cannot reach the JVM (Spark Connect), runs the Python paths.

* `contract`: the rows both sides exchange (columns, types, version), defined once in
  Python and rendered into the jar's `Contract.java` at build time.
* `bridge`: whether the session has the jar, which engine runs a step (and which one a
  run used, for its log and summary), and calls that return teed outputs.
"""

from __future__ import annotations

from sharestate.jvm.bridge import (
    ENGINES,
    MISSING,
    Engine,
    EngineInUse,
    Tee,
    available,
    call_teed,
    choose,
    engine_in_use,
)

__all__ = [
    "ENGINES",
    "MISSING",
    "Engine",
    "EngineInUse",
    "Tee",
    "available",
    "call_teed",
    "choose",
    "engine_in_use",
]
