"""JoinGroup: member ids, the initial delay, the join barrier, protocol choice and admission."""

from __future__ import annotations

from broker.coordinators.group.core import CoordinatorConfig, GroupMetadataRecord
from broker.runtime.timer_requests import SetTimer
from tests.unit.coordinators.group.core.harness import Harness, subscription

NONE, UNKNOWN_MEMBER_ID, INCONSISTENT, INVALID_GROUP_ID = 0, 25, 23, 24
INVALID_SESSION_TIMEOUT, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED, GROUP_MAX_SIZE = 26, 27, 79, 81


def test_first_join_asks_for_a_member_id_and_creates_the_group(h: Harness) -> None:
    r = h.response(h.join("g", client_id="app"))
    assert r.error_code == MEMBER_ID_REQUIRED
    assert r.member_id.startswith("app-") and len(r.member_id) == len("app-") + 36
    assert h.state("g") == "Empty"
    assert h.group("g").pending_members == {r.member_id: None}
    # Kafka 4.x writes the new group at once.
    [rec] = h.records()
    assert isinstance(rec, GroupMetadataRecord)
    assert (rec.value.protocol_type, rec.value.generation, rec.value.protocol, rec.value.leader) == ("", 0, None, None)
    assert rec.value.members == [] and rec.value.current_state_timestamp == h.now


def test_initial_delay_holds_the_first_generation(h: Harness) -> None:
    m, t = h.join_new("g")
    assert not h.answered(t)
    h.sleep(2999)
    assert not h.answered(t)
    h.sleep(1)
    r = h.response(t)
    assert (r.error_code, r.generation_id, r.leader, r.member_id) == (NONE, 1, m, m)
    assert r.protocol_type == "consumer" and r.protocol_name == "range"
    assert [(x.member_id, x.metadata) for x in r.members] == [(m, subscription("t"))]
    assert h.state("g") == "CompletingRebalance"


def test_initial_delay_is_extended_while_members_arrive(h: Harness) -> None:
    a, ta = h.join_new("g")
    h.sleep(2000)
    b, tb = h.join_new("g")
    h.sleep(1000)  # first delay over, but a member arrived during it
    assert not h.answered(ta) and not h.answered(tb)
    h.sleep(2999)
    assert not h.answered(ta)
    h.sleep(1)
    ra, rb = h.response(ta), h.response(tb)
    assert ra.generation_id == rb.generation_id == 1
    assert ra.leader == rb.leader == a
    assert {x.member_id for x in ra.members} == {a, b} and rb.members == []


def test_initial_delay_never_exceeds_the_rebalance_timeout(h: Harness) -> None:
    _a, ta = h.join_new("g", rebalance=5000)
    h.sleep(1000)
    h.join_new("g", rebalance=5000)
    h.sleep(2000)  # t=3000: re-armed for min(3000, 5000-3000) = 2000
    h.sleep(1000)
    h.join_new("g", rebalance=5000)  # arrives during the last stretch, which is not extended
    h.sleep(999)
    assert not h.answered(ta)
    h.sleep(1)
    assert h.response(ta).generation_id == 1
    assert len(h.response(ta).members) == 3


def test_zero_initial_delay_completes_at_once() -> None:
    h = Harness(CoordinatorConfig(group_initial_rebalance_delay_ms=0))
    _m, t = h.join_new("g")
    assert h.response(t).generation_id == 1


def test_join_phase_completes_as_soon_as_every_member_rejoined(h: Harness) -> None:
    (a,), gen = h.stable()
    _b, tb = h.join_new("g")
    assert h.state("g") == "PreparingRebalance" and not h.answered(tb)
    assert h.heartbeat("g", a, gen) == REBALANCE_IN_PROGRESS
    ta = h.join("g", a)
    # No delay and no timer wait: the last expected member's JoinGroup completes the phase.
    ra, rb = h.response(ta), h.response(tb)
    assert ra.generation_id == rb.generation_id == gen + 1
    assert ra.leader == a and len(ra.members) == 2
    assert "join:g" not in h.timers and "sync:g" in h.timers


def test_members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout(h: Harness) -> None:
    (a, b), gen = h.stable(n=2, session=60_000, rebalance=10_000)
    ta = h.join("g", a, session=60_000, rebalance=10_000)  # the leader rejoins: rebalance
    assert h.state("g") == "PreparingRebalance"
    h.sleep(9_999)
    assert not h.answered(ta)
    h.sleep(1)
    r = h.response(ta)
    assert r.generation_id == gen + 1 and [x.member_id for x in r.members] == [a]
    assert b not in h.group("g").members
    assert h.heartbeat("g", b, gen) == UNKNOWN_MEMBER_ID


def test_session_expiry_during_the_join_phase_completes_it(h: Harness) -> None:
    (a, b), gen = h.stable(n=2, session=6000)
    assert h.heartbeat("g", b, gen) == NONE
    ta = h.join("g", a, session=6000)
    h.sleep(5999)
    assert not h.answered(ta)
    h.sleep(1)  # b's session runs out: the barrier no longer waits for it
    r = h.response(ta)
    assert r.generation_id == gen + 1 and [m.member_id for m in r.members] == [a]


def test_everybody_gone_ends_the_generation_empty(h: Harness) -> None:
    (_a,), gen = h.stable(session=6000)
    h.sleep(6000)
    assert h.state("g") == "Empty"
    rec = h.records()[-1]
    assert isinstance(rec, GroupMetadataRecord)
    assert rec.value.generation == gen + 1 and rec.value.members == [] and rec.value.protocol is None
    assert rec.value.protocol_type == "consumer"
    assert [t[2] for t in h.transitions[-2:]] == ["PreparingRebalance", "Empty"]
    assert h.transitions[-2][5] == "session-timeout"


def test_pending_member_is_forgotten_after_its_session_timeout(h: Harness) -> None:
    r = h.response(h.join("g", session=7000))
    h.sleep(7000)
    assert h.group("g").pending_members == {}
    assert h.response(h.join("g", r.member_id)).error_code == UNKNOWN_MEMBER_ID


def test_a_pending_member_blocks_join_completion_until_it_joins(h: Harness) -> None:
    (a,), gen = h.stable()
    pending = h.response(h.join("g")).member_id
    ta = h.join("g", a)  # the leader rejoins; the pending member is still expected
    assert not h.answered(ta)
    tp = h.join("g", pending)
    assert h.response(ta).generation_id == h.response(tp).generation_id == gen + 1


def test_new_members_are_bounded_by_the_new_member_timeout(h: Harness) -> None:
    (a,), gen = h.stable(session=600_000, rebalance=900_000)
    b, tb = h.join_new("g", session=600_000, rebalance=900_000)
    for _ in range(30):
        h.sleep(10_000)
        h.heartbeat("g", a, gen)
    r = h.response(tb)
    assert r.error_code == UNKNOWN_MEMBER_ID and r.member_id == ""
    assert b not in h.group("g").members


def test_old_versions_join_without_member_id_required(h: Harness) -> None:
    t = h.join("g", version=3, client_id="old")
    h.sleep(3000)
    r = h.response(t)
    assert r.error_code == NONE and r.member_id.startswith("old-") and r.generation_id == 1


def test_v0_uses_the_session_timeout_as_rebalance_timeout(h: Harness) -> None:
    h.join("g", version=0, session=7000, rebalance=-1)
    member = next(iter(h.group("g").members.values()))
    assert member.rebalance_timeout_ms == 7000


def test_protocol_name_is_empty_before_v7_and_null_after_on_errors(h: Harness) -> None:
    for version, expected in [(6, ""), (7, None)]:
        r = h.response(h.join("", version=version))
        assert r.error_code == INVALID_GROUP_ID and r.protocol_name == expected


def test_validation_errors_echo_the_member_id(h: Harness) -> None:
    assert h.response(h.join("g", "m1", session=5999)).error_code == INVALID_SESSION_TIMEOUT
    assert h.response(h.join("g", "m1", session=1_800_001)).member_id == "m1"
    r = h.response(h.join("nope", "m1"))
    assert (r.error_code, r.member_id, r.generation_id) == (UNKNOWN_MEMBER_ID, "m1", -1)
    assert "nope" not in h.shard.state.groups
    h.stable()
    assert h.response(h.join("g", "stranger")).error_code == UNKNOWN_MEMBER_ID


def test_protocol_type_and_common_protocols_are_enforced(h: Harness) -> None:
    assert h.response(h.join("e", protocol_type="")).error_code == INCONSISTENT
    assert h.response(h.join("e2", protocols=[])).error_code == INCONSISTENT
    h.stable()
    r = h.response(h.join("g", protocol_type="connect"))
    assert (r.error_code, r.member_id) == (INCONSISTENT, "")
    assert h.response(h.join("g", protocols=[("sticky", b"")])).error_code == INCONSISTENT


def test_protocol_selection_by_vote_with_leader_preference_on_ties(h: Harness) -> None:
    rr, rg, st = ("roundrobin", b"rr"), ("range", b"rg"), ("sticky", b"st")
    _a, ta = h.join_new("g", protocols=[rg, rr, st])
    _b, _tb = h.join_new("g", protocols=[rr, rg])
    h.sleep(6000)
    # One vote each: the leader's (a's) preference decides.
    assert h.response(ta).protocol_name == "range"
    assert [x.metadata for x in h.response(ta).members] == [b"rg", b"rg"]
    h2 = Harness()
    h2.join_new("g", protocols=[rg, rr])
    h2.join_new("g", protocols=[rr, rg])
    _, t3 = h2.join_new("g", protocols=[rr, st, rg])
    h2.sleep(9000)
    assert h2.response(t3).protocol_name == "roundrobin"  # two votes to one


def test_followers_rejoining_unchanged_get_the_current_generation(h: Harness) -> None:
    (a, b), gen = h.stable(n=2)
    r = h.response(h.join("g", b))
    assert (r.error_code, r.generation_id, r.leader, r.members) == (NONE, gen, a, [])
    assert h.state("g") == "Stable"
    h.join("g", b, topics=("t", "u"))  # changed subscription: rebalance
    assert h.state("g") == "PreparingRebalance"
    assert h.transitions[-1][5] == "metadata-changed"


def test_group_max_size() -> None:
    h = Harness(CoordinatorConfig(group_max_size=2))
    (_a, b), _gen = h.stable(n=2)
    r = h.response(h.join("g"))
    # A v4+ newcomer is first only made pending; the rejoin with its id is refused.
    r = h.response(h.join("g", r.member_id))
    assert (r.error_code, r.member_id) == (GROUP_MAX_SIZE, "")
    assert h.state("g") == "Stable"
    # Existing members are still accepted.
    assert h.response(h.join("g", b)).error_code == NONE


def test_rebalance_timers_are_replaced_not_polled(h: Harness) -> None:
    (a, _b), _gen = h.stable(n=2)
    h.join("g", a)
    join_timers = [t for t in h.last.timers if isinstance(t, SetTimer) and t.key == "join:g"]
    assert join_timers == [SetTimer("join:g", h.now + 30_000)]
