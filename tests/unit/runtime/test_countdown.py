"""The one countdown every "answer once all of these have answered" uses."""

from __future__ import annotations

from broker.runtime.countdown import Countdown


def test_done_once_every_arrival_came() -> None:
    done: list[bool] = []
    countdown = Countdown(3, done.append)
    countdown.arrive()
    countdown.arrive(True)
    assert done == []
    countdown.arrive()
    assert done == [True]
    countdown.arrive()  # a stray arrival changes nothing
    assert done == [True]


def test_nothing_to_wait_for_is_done_at_once() -> None:
    done: list[bool] = []
    Countdown(0, done.append)
    assert done == [True]


def test_the_first_failure_finishes_it_and_later_arrivals_are_ignored() -> None:
    done: list[bool] = []
    countdown = Countdown(3, done.append)
    countdown.arrive()
    countdown.arrive(False)
    assert done == [False]
    countdown.arrive()
    countdown.arrive(False)
    assert done == [False]


def test_arrivals_counted_as_they_are_expected_finish_only_after_start() -> None:
    done: list[bool] = []
    countdown = Countdown(0, done.append, started=False)
    countdown.expect()
    countdown.arrive()  # all that was expected so far: more may still be expected
    assert done == []
    countdown.expect(2)
    countdown.arrive()
    countdown.start()
    assert done == []
    countdown.arrive()
    assert done == [True]


def test_started_with_everything_arrived_is_done_at_start() -> None:
    done: list[bool] = []
    countdown = Countdown(1, done.append, started=False)
    countdown.arrive()
    assert done == []
    countdown.start()
    assert done == [True]


def test_a_hold_arrives_once_however_often_it_is_called() -> None:
    """How a topic change settles: each listener's hold is called when its work is done, some
    twice (a callback on success and on a failure path); the publisher starts it at the end."""
    done: list[bool] = []
    countdown = Countdown(0, done.append, started=False)
    first, second = countdown.hold(), countdown.hold()
    first()
    first()
    countdown.start()
    assert done == []
    second()
    assert done == [True]
    second()
    assert done == [True]


def test_nothing_held_is_done_at_start() -> None:
    done: list[bool] = []
    countdown = Countdown(0, done.append, started=False)
    assert done == []
    countdown.start()
    assert done == [True]
