"""`sharestate follow`: an incremental run every interval, until stopped.

Each round is one incremental run (`sharestate.job.run.main` with `--mode incremental`) on
the same session, so the JVM and its compiled code stay warm from round to round. The
rounds start `every` seconds apart (a round longer than that is followed at once by the
next). SIGTERM or Ctrl-C asks the loop to stop: the round in progress ends as it would
(its tables and checkpoint committed) and no other starts; a second signal stops the
round itself, and the run puts back what it had written, as any failed run does. With
`once`, one round: the AvailableNow run a scheduler starts. A `kafka://` input whose topic
the cluster does not have yet (Kafka creates `__share_group_state` when a share group first
stores state) makes a round wait for the next instead of ending the loop.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from sharestate.errors import MissingTopicError

log = logging.getLogger("sharestate")

#: The signals that ask the loop to stop between rounds.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_between_rounds(stop: threading.Event) -> Iterator[None]:
    """While inside, SIGTERM and SIGINT set `stop`; a second one raises KeyboardInterrupt
    (the round in progress then fails and puts back what it wrote). Handlers are put back
    after. Only the main thread can install them: elsewhere nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ask(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        log.warning(
            "%s: stopping once this round ends (again to stop now)", signal.Signals(signum).name
        )
        stop.set()

    previous = {sig: signal.signal(sig, ask) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def waiting_for_topics(run_round: Callable[[], Any]) -> Callable[[], Any]:
    """`run_round`, except that a topic a `kafka://` input's cluster lacks is said in one
    line and the round ends: the next round looks again."""

    def round_() -> Any:
        try:
            return run_round()
        except MissingTopicError as missing:
            log.warning("%s yet; looking again next round", missing)
            return None

    return round_


def follow(
    run_round: Callable[[], Any],
    every_seconds: float,
    *,
    once: bool = False,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Call `run_round` every `every_seconds` until `stop` is set (or once); the rounds
    run."""
    stop = stop or threading.Event()
    rounds = 0
    while not stop.is_set():
        started = clock()
        run_round()
        rounds += 1
        if once:
            break
        stop.wait(max(0.0, every_seconds - (clock() - started)))
    return rounds
