"""The console's pages, rendered from what the reads return."""

from __future__ import annotations

from broker.console import pages
from broker.console.shown_listener import Listener
from broker.console.state import GroupState
from broker.console.timeline import build_timeline
from kclient.admin_client import GroupDescription, Member, StreamsTopology, Subtopology
from tests.unit.console.fakes import NODE, billing, cluster


def test_the_overview_shows_nodes_listeners_groups_by_type_and_state_and_topics() -> None:
    html = pages.overview(cluster(), [Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1:9092")])
    assert "127.0.0.1:9092" in html and "PLAINTEXT" in html
    assert "<td>Classic</td>" in html and "<td>Share</td>" in html and "<th>Stable</th>" in html
    assert "<td>orders</td><td>2</td>" in html and "<td>__consumer_offsets</td><td>50</td><td>yes</td>" in html


def test_the_groups_list_shows_every_group_with_its_last_rebalance() -> None:
    html = pages.groups(cluster())
    assert 'href="/groups/billing"' in html and "session-timeout" in html and "0.250 s" in html
    assert "<td>range</td><td>7</td><td>13</td>" in html  # lag in records, then in seconds
    # Ids are escaped in text and quoted in links.
    assert "&lt;shared&gt;" in html and 'href="/groups/%3Cshared%3E"' in html and "<shared>" not in html
    assert "2 of 2 groups" in html


def test_the_groups_list_filters_by_search_type_and_state() -> None:
    assert "1 of 2 groups" in pages.groups(cluster(), query="BILL")
    assert "1 of 2 groups" in pages.groups(cluster(), group_type="share")
    assert "0 of 2 groups" in pages.groups(cluster(), group_state="Dead")
    assert pages.groups_live("a b", "", "Stable") == "/live/groups?q=a+b&state=Stable"


def test_a_groups_page_has_members_offsets_the_timeline_and_the_doctor() -> None:
    html = pages.group(billing())
    assert '<span class="group-id">billing</span>' in html and '<b class="lag">7</b>' in html
    assert "<td>worker-0</td><td>alpha</td>" in html and "orders-0" in html
    assert '<b class="lag-seconds">42</b> s' in html and "<td>7</td><td>42</td>" in html
    assert '<svg class="timeline"' in html
    for cause in ("new-member-joined", "member-left", "session-timeout"):
        assert f'<span class="cause">{cause}</span>' in html
    assert '<span class="who" title="beta/beta-1">beta/beta-1</span>' in html
    assert '<span class="who" title="gamma/gamma-1">gamma/gamma-1</span>' in html
    assert "<td>2\u21921</td><td>2</td>" in html  # members before and after, partitions moved
    assert '<aside class="doctor"><h2>Doctor</h2>' in html


def test_a_page_is_a_layout_around_its_live_fragment() -> None:
    html = pages.layout("group <x>", "/live/groups/x", "<p>fragment</p>", "v1")
    assert '<main id="live" data-live="/live/groups/x" data-version="v1"><p>fragment</p></main>' in html
    assert "group &lt;x&gt;" in html and '<script src="/static/console.js">' in html
    assert "http://" not in html and "https://" not in html  # nothing loaded from elsewhere


def test_long_member_names_are_cut_short_with_the_whole_name_in_a_tooltip() -> None:
    state = billing()
    name = "leaver/leaver-7e755b9c-c297-4673-aaaf-b06fc8d88d77"
    state.timeline.spans[1].left = [name]
    html = pages.group(state)
    assert f'<span class="who" title="{name}">leaver/leaver-7e755b9c-c297\u2026</span>' in html


def test_a_share_groups_figures_are_its_own() -> None:
    from broker.console.share_figures import share_figures
    from broker.coordinators.group.service.state_metrics import Family

    families: list[Family] = [
        ("kcoord_share_records_in_flight", "", ["group", "state"],
         [(["jobs", "acquired"], 3.0), (["jobs", "available"], 1.0), (["other", "acquired"], 9.0)]),
        ("kcoord_share_redeliveries", "", ["group"], [(["jobs"], 4.0), (["other"], 7.0)]),
        ("kcoord_share_lock_expiries", "", ["group"], [(["other"], 2.0)]),
        ("kcoord_share_archived_at_delivery_limit", "", ["group"], [(["jobs"], 1.0)]),
        ("kcoord_share_group_members", "", [], [([], 5.0)]),
    ]
    assert share_figures(families, "jobs") == {"in flight: acquired": 3, "in flight: available": 1, "redelivered": 4,
                                               "lock expiries": 0, "archived at the delivery limit": 1}


def _streams_group(subtopologies: list[Subtopology] | None) -> GroupState:
    members = [Member("m-a", None, "app-a", "/127.0.0.1", [], {"active": ["0_0", "1_0"], "standby": ["0_1"],
                                                              "warmup": []}, "p-a", 2),
               Member("m-b", None, "app-b", "/127.0.0.1", [], {"active": ["0_1"], "standby": [], "warmup": ["1_1"]},
                      "p-b", 1)]
    group = GroupDescription("counts", "Stable", "Streams", "sticky", NODE, members,
                             StreamsTopology(7, 7, 2, subtopologies))
    return GroupState(group, [], {}, build_timeline([], "counts"), [])


def test_a_streams_groups_page_shows_tasks_per_member_and_its_topology() -> None:
    html = pages.group(_streams_group([Subtopology("0", ["words"], [], ["counts-repartition"], []),
                                       Subtopology("1", [], ["counts-repartition"], [], ["counts-changelog"])]))
    assert "<th>active tasks</th><th>standby tasks</th><th>warm-up tasks</th><th>topology epoch</th>" in html
    assert "<td>app-a</td><td>/127.0.0.1</td><td>-</td><td>0_0, 1_0</td><td>0_1</td><td>-</td><td>2</td>" in html
    assert "<td>0_1</td><td>-</td><td>1_1</td><td>1 <span class=\"stale\">STALE_TOPOLOGY</span></td>" in html
    assert '<b class="topology-epoch">2</b>' in html and "configured, 2 subtopologies" in html
    assert "STALE_TOPOLOGY: 1 of 2 members" in html and "app-b" in html
    assert "<td>1</td><td>-</td><td>counts-repartition</td><td>-</td><td>counts-changelog</td>" in html


def test_a_streams_group_whose_topology_is_not_configured_says_why_it_may_be() -> None:
    html = pages.group(_streams_group(None))
    assert "not configured" in html and "MISSING_INTERNAL_TOPICS" in html and 'class="subtopologies"' not in html
    # Other group types have no topology section.
    assert "<h2>Topology</h2>" not in pages.group(billing())


def test_a_share_groups_held_locks_soonest_first_and_its_own_only() -> None:
    from broker.console.share_figures import HeldLock, ShareDeliveries, held_locks
    from broker.share_partitions.core.partition import ACKNOWLEDGED, ACQUIRED, InFlight, SharePartition

    mine = SharePartition(records={5: InFlight(ACQUIRED, 2, "m-1", 31_000), 6: InFlight(ACQUIRED, 1, "m-2", 12_000),
                                   7: InFlight(ACKNOWLEDGED, 1)})
    other = SharePartition(records={0: InFlight(ACQUIRED, 1, "x", 1_000)})
    partitions = {("jobs", b"t1", 0): mine, ("other", b"t1", 0): other}
    total, first = held_locks(partitions, "jobs", lambda topic_id, index: "orders", now_ms=10_000, shown=1)
    assert (total, first) == (2, [HeldLock(2_000, "orders", 0, 6, "m-2", 1)])
    total, first = held_locks(partitions, "jobs", lambda topic_id, index: None, now_ms=10_000)
    assert total == 2 and [h.offset for h in first] == [6, 5] and first[0].topic == b"t1".hex()
    state = billing()
    state.group.group_type = "Share"
    html = pages.group(state, ShareDeliveries({"redelivered": 1}, 2, first[:1]))
    assert "2 records held by members" in html and "the 1 that expire first" in html
    assert f"<td>{b't1'.hex()}-0</td><td>6</td>" in html and "<td>1</td><td>2</td></tr>" in html
    assert 'class="held-locks"' not in pages.group(state, ShareDeliveries({"redelivered": 1}))
