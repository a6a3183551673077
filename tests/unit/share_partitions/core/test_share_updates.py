"""ShareUpdate records: after any sequence of acquisitions, acknowledgements, releases and lock
expiries, replaying the first ShareSnapshot and the ShareUpdates written after each step (through
their bytes) gives back the share partition's durable state, as a snapshot of it would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.share_partitions.core import records
from broker.share_partitions.core.partition import (
    ACCEPT,
    ACQUIRED,
    AVAILABLE,
    REJECT,
    RELEASE,
    BatchRange,
    Limits,
    SharePartition,
)
from protocol.payloads import share_state_records
from protocol.payloads.share_state_records import SNAPSHOT, UPDATE, ShareStateRecord

L = Limits(lock_ms=10, delivery_limit=3, max_in_flight=8)
END = 30
MEMBERS = ("a", "b")


def durable(sp: SharePartition) -> tuple[int, dict[int, tuple[int, int]]]:
    """What a restart keeps: the start offset and each in-flight record's state (acquired ones
    as available) and delivery count."""
    return sp.start_offset, {o: (AVAILABLE if r.state == ACQUIRED else r.state, r.delivery_count)
                             for o, r in sp.records.items()}


def through_bytes(kind: int, value: object) -> object:
    key, data = share_state_records.encode(ShareStateRecord(kind, "g", b"t" * 16, 0, value))
    decoded = share_state_records.decode(key, data)
    assert decoded is not None and decoded.record_type == kind
    return decoded.value


step = st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(1, 6)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.sampled_from((ACCEPT, RELEASE, REJECT))),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS), st.just(0)),
    st.tuples(st.just("expire"), st.just(""), st.just(0)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(step, max_size=25))
def test_snapshot_then_updates_replay_to_the_same_state(steps: list[tuple[str, str, int]]) -> None:
    sp = SharePartition()
    sp.initialize(0)
    written = [(SNAPSHOT, through_bytes(SNAPSHOT, records.snapshot(sp, 0, 0, 0, 0)))]
    sp.changed.clear()
    now = 0
    for action, member, n in steps:
        now += 4
        if action == "acquire":
            sp.acquire(member, [BatchRange(0, END - 1, False)], END, n, now, L)
        elif action == "ack":
            held = sorted(o for o, r in sp.records.items() if r.state == ACQUIRED and r.member == member)
            if held:
                sp.acknowledge(member, held[0], held[0], [n], L, now)
        elif action == "leave":
            sp.release_member(member, L)
        else:
            sp.expire(now, L)
        written.append((UPDATE, through_bytes(UPDATE, records.update(sp, 0))))
        sp.changed.clear()
    replayed = records.load(written[0][1])
    for _kind, value in written[1:]:
        records.apply_update(replayed, value)
    assert durable(replayed) == durable(sp)
    assert durable(replayed) == durable(records.load(records.snapshot(sp, 0, 0, 0, 0)))
