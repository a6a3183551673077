"""SyncGroup: the leader's assignment is persisted, each member gets only its own."""

from __future__ import annotations

from broker.coordinators.group.core import GroupMetadataRecord
from tests.unit.coordinators.group.core.harness import Harness

NONE, ILLEGAL_GENERATION, INCONSISTENT, INVALID_GROUP_ID = 0, 22, 23, 24
UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 25, 27


def completing(h: Harness, n: int = 2, **kw: object) -> tuple[list[str], int]:
    tokens = [h.join_new("g", **kw) for _ in range(n)]  # type: ignore[arg-type]
    h.sleep(3000 * (n + 1))
    gen = h.response(tokens[0][1]).generation_id
    assert h.state("g") == "CompletingRebalance"
    return [m for m, _ in tokens], gen


def test_leader_assignment_is_stored_and_handed_out(h: Harness) -> None:
    (a, b), gen = completing(h)
    tb = h.sync("g", b, gen)
    assert not h.answered(tb)  # parked until the leader's assignment is stored
    ta = h.sync("g", a, gen, {a: b"for-a", b: b"for-b", "ghost": b"x"})
    assert h.response(ta).assignment == b"for-a"
    rb = h.response(tb)
    assert (rb.error_code, rb.assignment, rb.protocol_type, rb.protocol_name) == (NONE, b"for-b", "consumer", "range")
    assert h.state("g") == "Stable"
    # The record is in the same result as the replies: it is durable before they leave.
    [rec] = h.last.records
    assert isinstance(rec, GroupMetadataRecord)
    assert rec.value.generation == gen and rec.value.leader == a and rec.value.protocol == "range"
    assert [(m.member_id, m.assignment) for m in rec.value.members] == [(a, b"for-a"), (b, b"for-b")]
    assert {tok for tok, _ in h.last.replies} == {ta, tb}
    # A later SyncGroup in Stable gets the stored assignment at once.
    assert h.response(h.sync("g", b, gen)).assignment == b"for-b"


def test_members_left_out_by_the_leader_get_an_empty_assignment(h: Harness) -> None:
    (a, b), gen = completing(h)
    h.sync("g", a, gen, {a: b"x"})
    r = h.response(h.sync("g", b, gen))
    assert (r.error_code, r.assignment) == (NONE, b"")


def test_sync_errors(h: Harness) -> None:
    assert h.response(h.sync("", "m", 1)).error_code == INVALID_GROUP_ID
    assert h.response(h.sync("nope", "m", 1)).error_code == UNKNOWN_MEMBER_ID
    h.response(h.join("empty"))
    assert h.response(h.sync("empty", "m", 0)).error_code == UNKNOWN_MEMBER_ID
    (a, _b), gen = completing(h)
    assert h.response(h.sync("g", "stranger", gen)).error_code == UNKNOWN_MEMBER_ID
    assert h.response(h.sync("g", a, gen + 1)).error_code == ILLEGAL_GENERATION
    assert h.response(h.sync("g", a, gen, protocol_type="connect")).error_code == INCONSISTENT
    assert h.response(h.sync("g", a, gen, protocol_name="roundrobin")).error_code == INCONSISTENT


def test_sync_while_preparing_rebalance(h: Harness) -> None:
    (a, b), gen = h.stable(n=2)
    h.join("g", a)
    assert h.response(h.sync("g", b, gen)).error_code == REBALANCE_IN_PROGRESS


def test_a_new_rebalance_releases_parked_syncs_with_rebalance_in_progress(h: Harness) -> None:
    (_a, b), gen = completing(h)
    tb = h.sync("g", b, gen)
    h.join_new("g")
    r = h.response(tb)
    assert (r.error_code, r.assignment, r.protocol_name) == (REBALANCE_IN_PROGRESS, b"", None)
    assert h.state("g") == "PreparingRebalance"


def test_members_that_never_sync_are_removed_at_the_sync_timeout(h: Harness) -> None:
    (a, b), gen = completing(h, rebalance=20_000, session=30_000)
    ta = h.sync("g", a, gen, {a: b"a", b: b"b"})
    assert h.state("g") == "Stable" and h.response(ta).error_code == NONE
    h.sleep(20_000)  # b never sent SyncGroup
    assert b not in h.group("g").members
    assert h.state("g") == "PreparingRebalance"
    assert h.transitions[-1][5] == "sync-timeout"
    # The leader rejoins and is alone in the next generation.
    r = h.response(h.join("g", a, rebalance=20_000, session=30_000))
    assert r.generation_id == gen + 1 and [m.member_id for m in r.members] == [a]


def test_sync_timer_is_cancelled_once_everybody_synced(h: Harness) -> None:
    (a, b), gen = completing(h)
    assert "sync:g" in h.timers
    h.sync("g", b, gen)
    h.sync("g", a, gen, {})
    assert "sync:g" not in h.timers


def test_parked_sync_keeps_the_member_alive(h: Harness) -> None:
    (a, b), gen = completing(h, session=6000, rebalance=60_000)
    tb = h.sync("g", b, gen)
    assert h.heartbeat("g", a, gen) == NONE
    for _ in range(3):  # b's session timer fires while its SyncGroup is parked: no effect
        h.sleep(4000)
        assert h.heartbeat("g", a, gen) == NONE
    assert b in h.group("g").members and not h.answered(tb)
    h.sync("g", a, gen, {b: b"x"})
    assert h.response(tb).assignment == b"x"
    assert h.timers[f"heartbeat:g:{b}"] == h.now + 6000
