"""DescribeGroups v0-6, ListGroups v0-5 filters and DeleteGroups."""

from __future__ import annotations

from broker.coordinators.group.core import GroupMetadataRecord, OffsetCommitRecord
from tests.unit.coordinators.group.core.harness import Harness, subscription

NONE, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND = 0, 68, 69


def test_describe_stable_group_shows_protocol_and_members(h: Harness) -> None:
    (a, b), _gen = h.stable(n=2, client_id="app")
    d = h.shard.describe_group("g", 5)
    assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (NONE, "Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) for m in d.members] == [
        (a, "app", "/127.0.0.1", subscription("t"), a.encode()),
        (b, "app", "/127.0.0.1", subscription("t"), b.encode()),
    ]


def test_describe_rebalancing_group_hides_metadata_and_protocol(h: Harness) -> None:
    (a, _b), _gen = h.stable(n=2)
    h.join("g", a)
    d = h.shard.describe_group("g", 5)
    assert (d.group_state, d.protocol_data) == ("PreparingRebalance", "")
    assert all(m.member_metadata == b"" for m in d.members)


def test_describe_unknown_group_by_version(h: Harness) -> None:
    d = h.shard.describe_group("nope", 5)
    assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data, d.members) == (NONE, "Dead", "", "", [])
    d = h.shard.describe_group("nope", 6)
    assert (d.error_code, d.error_message, d.group_state) == (GROUP_ID_NOT_FOUND, "Group nope not found.", "Dead")


def test_list_groups_filters_by_state_and_type(h: Harness) -> None:
    h.stable("stable")
    h.join("empty")
    h.commit("simple", {("t", 0): 1})
    listed = {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in h.shard.list_groups(None, None)}
    assert listed == {
        "stable": ("consumer", "Stable", "classic"),
        "empty": ("", "Empty", "classic"),
        "simple": ("", "Empty", "classic"),
    }
    assert {g.group_id for g in h.shard.list_groups({"stable", " EMPTY "}, None)} == set(listed)
    assert [g.group_id for g in h.shard.list_groups({"Stable"}, {"Classic"})] == ["stable"]
    assert h.shard.list_groups(None, {"consumer"}) == []
    assert h.shard.list_groups({"Dead"}, None) == []


def test_delete_empty_group_tombstones_offsets_and_metadata(h: Harness) -> None:
    (a,), gen = h.stable()
    h.commit("g", {("t", 0): 1, ("u", 1): 2}, generation=gen, member_id=a)
    h.leave("g", [(a, None)])
    before = len(h.log)
    assert h.delete_group("g") == NONE
    written = h.records()[before:]
    assert written == [
        OffsetCommitRecord("g", "t", 0, None),
        OffsetCommitRecord("g", "u", 1, None),
        GroupMetadataRecord("g", None),
    ]
    assert "g" not in h.shard.state.groups
    assert h.fetch("g", [("t", [0])]) == {("t", 0): (-1, -1, "", 0)}
    assert h.delete_group("g") == GROUP_ID_NOT_FOUND
    h.restart()
    assert "g" not in h.shard.state.groups


def test_delete_refuses_groups_with_members(h: Harness) -> None:
    h.stable()
    assert h.delete_group("g") == NON_EMPTY_GROUP
    assert h.delete_group("unknown") == GROUP_ID_NOT_FOUND
