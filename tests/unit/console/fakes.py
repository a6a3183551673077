"""What the console's reads return, made by hand: a cluster with a classic group and a share group."""

from __future__ import annotations

from broker.console.state import ClusterState, GroupState, GroupSummary
from broker.console.timeline import build_timeline
from doctor import diagnose
from kclient.admin_client import GroupDescription, Member, Node, TopicInfo
from kclient.groups_output import OffsetRow
from tests.unit.console.events import EVENTS

NODE = Node(1, "127.0.0.1", 9092)


def billing(members: int = 1, lag: int = 7) -> GroupState:
    group = GroupDescription("billing", "Stable", "Classic", "range", NODE, [
        Member(f"worker-{i}", None, "alpha", "/127.0.0.1", [("orders", i)]) for i in range(members)])
    rows = [OffsetRow("billing", "orders", 0, 10, 10 + lag, "worker-0", "/127.0.0.1", "alpha")]
    return GroupState(group, rows, {}, build_timeline(EVENTS, "billing"), diagnose(EVENTS), lag=lag,
                      lag_seconds={("orders", 0): 42.4})


def cluster(lag: int = 7) -> ClusterState:
    timeline = build_timeline(EVENTS, "billing")
    return ClusterState([NODE], [TopicInfo("orders", 2, False, {0: 1, 1: 1}), TopicInfo("__consumer_offsets", 50, True)],
                        [GroupSummary("billing", "Classic", "Stable", 1, "range", lag, 12.6, timeline.last, coordinator=1),
                         GroupSummary("<shared>", "Share", "Empty", 0, "simple", coordinator=1)])
