"""The coordinator's timer service: keyed deadlines, re-armed cheaply, fired once and on time."""

from __future__ import annotations

import time

import pytest

from broker.runtime.timers import TimerService, wall_ms


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def service() -> tuple[TimerService, Clock, list[tuple[int, str, int]]]:
    clock = Clock()
    fired: list[tuple[int, str, int]] = []
    return TimerService(lambda shard, key, now: fired.append((shard, key, now)), clock), clock, fired


def test_fires_at_its_deadline_and_not_before() -> None:
    timers, clock, fired = service()
    timers.set(3, "join:g", clock.now + 500)
    assert timers.fire_due() == 500
    clock.now += 499
    timers.fire_due()
    assert fired == []
    clock.now += 1
    assert timers.fire_due() == -1
    assert fired == [(3, "join:g", clock.now)]
    assert len(timers) == 0


def test_rearming_later_moves_the_deadline_without_growing_the_heap() -> None:
    timers, clock, fired = service()
    start = clock.now
    for i in range(1000):  # a member heartbeating every 10 ms, session timeout 30 s
        clock.now = start + 10 * i
        timers.set(0, "heartbeat:g:m", clock.now + 30_000)
        timers.fire_due()
    assert len(timers.heap) == 1
    last = clock.now + 30_000
    clock.now = start + 30_000  # the first deadline has passed; the last has not
    timers.fire_due()
    assert fired == []
    clock.now = last - 1
    timers.fire_due()
    assert fired == []
    clock.now = last
    timers.fire_due()
    assert fired == [(0, "heartbeat:g:m", last)]


def test_rearming_earlier_fires_at_the_earlier_deadline_once() -> None:
    timers, clock, fired = service()
    timers.set(0, "sync:g", clock.now + 60_000)
    timers.set(0, "sync:g", clock.now + 100)
    clock.now += 100
    timers.fire_due()
    assert fired == [(0, "sync:g", clock.now)]
    clock.now += 60_000
    timers.fire_due()
    assert len(fired) == 1


def test_cancelled_keys_never_fire() -> None:
    timers, clock, fired = service()
    timers.set(0, "a", clock.now + 10)
    timers.set(0, "b", clock.now + 10)
    timers.set(0, "b", clock.now + 20)  # re-armed, then cancelled
    timers.cancel(0, "a")
    timers.cancel(0, "b")
    timers.cancel(0, "never-armed")
    clock.now += 100
    assert timers.fire_due() == -1
    assert fired == []


def test_cancel_shard_forgets_only_that_shard() -> None:
    timers, clock, fired = service()
    for shard in (1, 2):
        timers.set(shard, "heartbeat:g:m", clock.now + 10)
    timers.cancel_shard(1)
    clock.now += 10
    timers.fire_due()
    assert fired == [(2, "heartbeat:g:m", clock.now)]


def test_a_fired_timer_may_arm_its_key_again() -> None:
    clock = Clock()
    fired: list[int] = []
    timers: TimerService

    def sweep(shard: int, key: str, now: int) -> None:
        fired.append(now)
        timers.set(shard, key, now + 1000)

    timers = TimerService(sweep, clock)
    timers.set(0, "offsets-expiry", clock.now + 1000)
    for _ in range(3):
        clock.now += 1000
        timers.fire_due()
    assert fired == [clock.now - 2000, clock.now - 1000, clock.now]


def test_many_members_keep_the_heap_near_one_entry_each() -> None:
    timers, clock, fired = service()
    start = clock.now
    for tick in range(200):  # 500 members heartbeating every 100 ms for 20 s, session 3 s
        clock.now = start + 100 * tick
        for m in range(500):
            timers.set(m % 50, f"heartbeat:g{m}:m{m}", clock.now + 3000)
        timers.fire_due()
    assert fired == []
    assert len(timers) == 500
    assert len(timers.heap) <= 2 * 500
    clock.now += 3000
    timers.fire_due()
    assert len(fired) == 500
    assert timers.heap == []


class Steady(Clock):
    def __init__(self) -> None:
        self.now = 5_000


def test_deadlines_elapse_on_the_steady_clock_when_the_wall_clock_is_stepped() -> None:
    wall, steady = Clock(), Steady()
    fired: list[tuple[int, str, int]] = []
    timers = TimerService(lambda shard, key, now: fired.append((shard, key, now)), wall, steady)
    timers.set(0, "heartbeat:g:a", wall.now + 45_000)  # a session timeout from now
    timers.set(0, "heartbeat:g:b", wall.now + 45_000)
    wall.now += 60_000  # the wall clock stepped a minute ahead: no session has timed out
    steady.now += 10
    timers.fire_due()
    assert fired == []
    timers.set(0, "heartbeat:g:b", wall.now + 45_000)  # b heartbeats, on the stepped clock
    wall.now -= 120_000  # and back, a minute behind where it began
    steady.now += 44_990
    timers.fire_due()
    assert fired == [(0, "heartbeat:g:a", wall.now)]  # a: 45 s of real time, fired with the wall time
    steady.now += 9
    timers.fire_due()
    assert len(fired) == 1
    steady.now += 1
    timers.fire_due()
    assert [key for _, key, _ in fired] == ["heartbeat:g:a", "heartbeat:g:b"]


def test_never_fires_before_the_wall_clock_reads_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The system's wall clock read rounded down, trio's steady clock to the nearest millisecond:
    with a wall reading 0.99 ms short of the true time and a steady one 0.5 ms short, a deadline
    moved between them by their difference came due when the wall clock read a millisecond before
    it (a rebalance timeout of 7,000 ms journaled as a 6,999 ms join phase)."""
    true_wall_ms, true_steady_ms = [1_000_000.99], [5_000.5]
    monkeypatch.setattr(time, "time", lambda: true_wall_ms[0] / 1000)
    fired: list[int] = []
    timers = TimerService(lambda shard, key, now: fired.append(now), wall_ms, lambda: round(true_steady_ms[0]))
    deadline = wall_ms() + 100
    timers.set(0, "join:g", deadline)

    def elapse(ms: float) -> None:
        true_wall_ms[0] += ms
        true_steady_ms[0] += ms
        timers.fire_due()

    elapse(99.0)  # the wall clock reads 1,000,099: one short
    assert fired == []
    elapse(2.0)  # a millisecond late at most
    assert fired and fired[0] >= deadline


@pytest.mark.parametrize("wall_fraction_ns, steady_fraction_ns", [
    (990_000, 0), (0, 990_000), (999_999, 999_999), (500_000, 499_999), (1, 999_998)])
def test_the_brokers_clocks_never_fire_a_deadline_early(
        monkeypatch: pytest.MonkeyPatch, wall_fraction_ns: int, steady_fraction_ns: int) -> None:
    """The broker's own pair (the system's wall clock and its monotonic clock, each read rounded
    down): whatever fractions of a millisecond the two readings carry, and with time moving on
    between one read and the next, a deadline comes due once the wall clock reads it, and at most
    two milliseconds after."""
    from broker.runtime import timers as module
    from broker.runtime.timers import steady_ms

    true_ns = [0]
    wall_base, steady_base = 1_700_000_000_000_000_000 + wall_fraction_ns, 5_000_000_000 + steady_fraction_ns

    def read(base: int) -> int:
        true_ns[0] += 300  # every read sees time a little further on
        return base + true_ns[0]

    monkeypatch.setattr(module, "_time_ns", lambda: read(wall_base))
    monkeypatch.setattr(module, "_monotonic_ns", lambda: read(steady_base))
    monkeypatch.setattr(time, "time", lambda: read(wall_base) / 1e9)
    fired: list[int] = []
    timers = TimerService(lambda shard, key, now: fired.append(now), wall_ms, steady_ms)
    deadline = wall_ms() + 100
    timers.set(0, "join:g", deadline)
    while not fired:
        true_ns[0] += 10_000  # 0.01 ms
        before = (wall_base + true_ns[0]) // 1_000_000
        timers.fire_due()
        assert fired or before < deadline + 2, "not fired two milliseconds after its deadline"
    assert fired[0] >= deadline
