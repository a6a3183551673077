"""Static membership (KIP-345, KIP-814): replacement without rebalance, fencing, persistence."""

from __future__ import annotations

from broker.coordinators.group.core import GroupMetadataRecord
from tests.unit.coordinators.group.core.harness import Harness, subscription

NONE, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID = 0, 25, 27, 82


def static_group(h: Harness, n: int = 2, **kw: object) -> tuple[list[str], int]:
    ts = [h.join("g", instance_id=f"i{k}", client_id=f"c{k}", **kw) for k in range(n)]  # type: ignore[arg-type]
    h.sleep(3000 * (n + 1))
    rs = [h.response(t) for t in ts]
    ids = [r.member_id for r in rs]
    gen = rs[0].generation_id
    h.sync("g", ids[0], gen, {m: f"assign-{k}".encode() for k, m in enumerate(ids)}, instance_id="i0")
    for k, m in enumerate(ids[1:], 1):
        h.sync("g", m, gen, instance_id=f"i{k}")
    assert h.state("g") == "Stable"
    return ids, gen


def test_new_static_members_get_instance_based_ids_without_member_id_required(h: Harness) -> None:
    t = h.join("g", instance_id="inst-1", version=9)
    assert not h.answered(t)
    h.sleep(3000)
    r = h.response(t)
    assert r.error_code == NONE and r.member_id.startswith("inst-1-")
    assert r.members[0].group_instance_id == "inst-1"


def test_restarted_follower_replaces_itself_without_rebalance(h: Harness) -> None:
    (a, b), gen = static_group(h)
    t = h.join("g", instance_id="i1", version=5)
    r = h.response(t)
    new_b = r.member_id
    assert new_b != b and new_b.startswith("i1-")
    assert (r.error_code, r.generation_id, r.leader, r.members, r.protocol_name) == (NONE, gen, a, [], "range")
    assert h.state("g") == "Stable"
    [rec] = h.last.records
    assert isinstance(rec, GroupMetadataRecord)
    assert [(m.member_id, m.group_instance_id, m.assignment) for m in rec.value.members] == [
        (a, "i0", b"assign-0"), (new_b, "i1", b"assign-1")]
    # The replacement collects the stored assignment; the old id is fenced everywhere.
    assert h.response(h.sync("g", new_b, gen, instance_id="i1")).assignment == b"assign-1"
    assert h.heartbeat("g", b, gen, instance_id="i1") == FENCED_INSTANCE_ID
    assert h.response(h.join("g", b, instance_id="i1")).error_code == FENCED_INSTANCE_ID
    assert h.response(h.sync("g", b, gen, instance_id="i1")).error_code == FENCED_INSTANCE_ID
    assert h.commit("g", {("t", 0): 5}, generation=gen, member_id=b, instance_id="i1") == {("t", 0): FENCED_INSTANCE_ID}
    assert f"heartbeat:g:{b}" not in h.timers and f"heartbeat:g:{new_b}" in h.timers


def test_restarted_leader_learns_it_leads_but_skips_assignment_from_v9(h: Harness) -> None:
    (_a, b), _gen = static_group(h)
    r = h.response(h.join("g", instance_id="i0", version=9))
    assert r.leader == r.member_id and r.skip_assignment is True
    assert {m.member_id for m in r.members} == {r.member_id, b}
    assert h.state("g") == "Stable"


def test_restarted_leader_before_v9_sees_the_old_leader_id(h: Harness) -> None:
    (a, _b), _gen = static_group(h)
    r = h.response(h.join("g", instance_id="i0", version=8))
    assert r.leader == a and r.member_id != a and r.members == [] and r.skip_assignment is False
    assert h.group("g").leader_id == r.member_id


def test_replacement_that_changes_the_protocol_rebalances(h: Harness) -> None:
    rg, rr = ("range", subscription("t")), ("roundrobin", subscription("t"))
    static_group(h, n=3, protocols=[rg, rr])
    assert h.group("g").protocol_name == "range"
    h.join("g", instance_id="i2", protocols=[rr, rg])  # range still wins two to one: no rebalance
    assert h.state("g") == "Stable"
    h.join("g", instance_id="i1", protocols=[rr, rg])  # now roundrobin would win
    assert h.state("g") == "PreparingRebalance"
    assert h.transitions[-1][5] == "static-member-protocol-changed"


def test_replacement_during_completing_rebalance_rebalances_and_fences_the_parked_sync(h: Harness) -> None:
    ts = [h.join("g", instance_id=f"i{k}") for k in range(2)]
    h.sleep(9000)
    a, b = (h.response(t).member_id for t in ts)
    gen = h.response(ts[0]).generation_id
    tb = h.sync("g", b, gen, instance_id="i1")
    t_new = h.join("g", instance_id="i1")
    assert h.response(tb).error_code == FENCED_INSTANCE_ID
    assert h.state("g") == "PreparingRebalance" and not h.answered(t_new)
    assert h.transitions[-1][5] == "static-member-replaced"
    ta = h.join("g", a, instance_id="i0")
    assert h.response(ta).generation_id == h.response(t_new).generation_id == gen + 1


def test_replacement_while_preparing_fences_the_old_parked_join(h: Harness) -> None:
    (a, b), gen = static_group(h)
    tb = h.join("g", b, instance_id="i1", topics=("t", "u"))  # changed metadata: rebalance, b parked
    t_new = h.join("g", instance_id="i1", topics=("t", "u"))
    rb = h.response(tb)
    assert (rb.error_code, rb.member_id) == (FENCED_INSTANCE_ID, b)
    assert not h.answered(t_new)
    ta = h.join("g", a, instance_id="i0")
    assert h.response(ta).generation_id == gen + 1 == h.response(t_new).generation_id


def test_static_members_that_do_not_rejoin_are_kept(h: Harness) -> None:
    (a, b), gen = static_group(h, session=120_000, rebalance=10_000)
    ta = h.join("g", a, instance_id="i0", session=120_000, rebalance=10_000)
    h.sleep(10_000)
    r = h.response(ta)
    assert r.generation_id == gen + 1
    assert set(h.group("g").members) == {a, b}
    assert {m.member_id for m in r.members} == {a, b}


def test_static_members_survive_a_restart(h: Harness) -> None:
    (a, b), gen = static_group(h)
    h.restart()
    group = h.group("g")
    assert group.static_members == {"i0": a, "i1": b}
    r = h.response(h.join("g", instance_id="i1", version=9))
    assert r.error_code == NONE and r.generation_id == gen and h.state("g") == "Stable"


def test_unknown_instance_with_a_member_id_is_unknown(h: Harness) -> None:
    static_group(h)
    assert h.response(h.join("g", "some-id", instance_id="i7")).error_code == UNKNOWN_MEMBER_ID
