"""`sharestate follow`'s loop: rounds every interval, a stop asked between rounds."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from sharestate.job.follow import follow, stop_between_rounds


def test_once_runs_one_round() -> None:
    rounds: list[int] = []
    assert follow(lambda: rounds.append(1), every_seconds=3600, once=True) == 1
    assert rounds == [1]


def test_a_stop_asked_during_a_round_ends_the_loop_after_it() -> None:
    stop = threading.Event()
    done: list[int] = []

    def round_() -> None:
        done.append(len(done))
        if len(done) == 3:
            stop.set()  # as a signal would, while the round runs

    assert follow(round_, every_seconds=0, stop=stop) == 3
    assert done == [0, 1, 2]


def test_rounds_start_every_interval_not_after_it() -> None:
    stop = threading.Event()
    now = [0.0]
    waits: list[float] = []

    class Recorded(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(float(timeout or 0))
            now[0] += float(timeout or 0)
            if len(waits) == 2:
                self.set()
            return self.is_set()

    recorded = Recorded()

    def round_() -> None:
        now[0] += 4.0  # each round takes 4 s

    follow(round_, every_seconds=10, stop=recorded, clock=lambda: now[0])
    assert waits == [6.0, 6.0]
    assert not stop.is_set()


def test_sigterm_asks_to_stop_and_a_second_one_interrupts() -> None:
    stop = threading.Event()
    with stop_between_rounds(stop):
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.is_set()  # the round goes on: nothing raised
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_topic_not_there_yet_waits_for_the_next_round(caplog: pytest.LogCaptureFixture) -> None:
    from sharestate.errors import InputError, MissingTopicError
    from sharestate.job.follow import waiting_for_topics

    outcomes: list[Exception | None] = [MissingTopicError("kafka://k:9092: no topic t"), None]

    def round_() -> str:
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome
        return "ran"

    guarded = waiting_for_topics(round_)
    assert guarded() is None
    assert "no topic t yet; looking again next round" in caplog.text
    assert guarded() == "ran"

    def unreadable() -> None:
        raise InputError("kafka://k:9092: no Kafka broker answered")

    # Any other input error still ends the loop.
    with pytest.raises(InputError):
        waiting_for_topics(unreadable)()
