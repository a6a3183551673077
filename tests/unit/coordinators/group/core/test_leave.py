"""LeaveGroup v0-5: single and batch leaves, pending members, instance ids, folding for v0-2."""

from __future__ import annotations

from broker.coordinators.group.core import GroupMetadataRecord
from tests.unit.coordinators.group.core.harness import Harness

NONE, INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID = 0, 24, 25, 82


def test_leaving_triggers_a_rebalance(h: Harness) -> None:
    (a, b), gen = h.stable(n=2)
    r = h.leave("g", [(b, None)])
    assert r.error_code == NONE and [(m.member_id, m.error_code) for m in r.members] == [(b, NONE)]
    assert h.state("g") == "PreparingRebalance"
    assert h.transitions[-1][5] == "member-left"
    assert f"heartbeat:g:{b}" not in h.timers
    ta = h.join("g", a)
    assert h.response(ta).generation_id == gen + 1


def test_last_member_leaving_empties_the_group(h: Harness) -> None:
    (a,), gen = h.stable()
    h.leave("g", [(a, None)])
    assert h.state("g") == "Empty"
    rec = h.last.records[-1]
    assert isinstance(rec, GroupMetadataRecord) and rec.value.generation == gen + 1 and rec.value.members == []


def test_a_leave_completes_a_join_phase_waiting_only_for_the_leaver(h: Harness) -> None:
    (a, b), gen = h.stable(n=2)
    ta = h.join("g", a)
    assert not h.answered(ta)
    h.leave("g", [(b, None)])
    assert h.response(ta).generation_id == gen + 1


def test_v0_to_v2_fold_the_member_error_into_the_top_level(h: Harness) -> None:
    (a,), _ = h.stable()
    for version in (0, 1, 2):
        assert h.leave("g", [("stranger", None)], version=version).error_code == UNKNOWN_MEMBER_ID
        assert h.leave("nope", [("m", None)], version=version).error_code == UNKNOWN_MEMBER_ID
    assert h.leave("g", [(a, None)], version=0).error_code == NONE
    assert h.leave("", [(a, None)], version=0).error_code == INVALID_GROUP_ID


def test_unknown_group_answers_every_member_unknown(h: Harness) -> None:
    r = h.leave("nope", [("m1", None), ("", "i1")])
    assert r.error_code == NONE
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [
        ("m1", None, UNKNOWN_MEMBER_ID), ("", "i1", UNKNOWN_MEMBER_ID)]


def test_batch_leave_mixes_outcomes(h: Harness) -> None:
    (a, b, c), _gen = h.stable(n=3)
    pending = h.response(h.join("g")).member_id
    r = h.leave("g", [(b, None), (pending, None), ("stranger", None), ("", "no-such-instance"), (c, "i9")])
    assert [m.error_code for m in r.members] == [NONE, NONE, UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID]
    assert set(h.group("g").members) == {a, c}
    assert h.group("g").pending_members == {}


def test_static_members_leave_by_instance_id(h: Harness) -> None:
    ts = [h.join("g", instance_id=f"i{n}") for n in range(2)]
    h.sleep(6000)
    ids = [h.response(t).member_id for t in ts]
    r = h.leave("g", [("", "i1")])
    assert r.members[0].error_code == NONE
    assert set(h.group("g").members) == {ids[0]}
    r = h.leave("g", [("wrong-id", "i0")])
    assert r.members[0].error_code == FENCED_INSTANCE_ID


def test_leave_answers_a_parked_join_unknown_member(h: Harness) -> None:
    (a, b), gen = h.stable(n=2, session=60_000)
    h.heartbeat("g", b, gen)
    ta = h.join("g", a, session=60_000)
    h.leave("g", [(a, None)], version=3)
    r = h.response(ta)
    assert (r.error_code, r.member_id) == (UNKNOWN_MEMBER_ID, "")
