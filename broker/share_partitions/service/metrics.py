"""Scrape-time gauges of share groups (KIP-932): groups and members from the coordinator shards,
records in flight per group, each share partition's lag (records from its start offset to the
partition's end not yet acknowledged or archived), and per group what its share partitions counted
since they were loaded: redeliveries, lock expiries and records archived at the delivery limit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

from broker.coordinators.group.service.coordinator import GroupCoordinatorService
from broker.coordinators.group.service.state_metrics import Family
from broker.share_partitions.core.partition import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE
from broker.share_partitions.service.manager import SharePartitionManager

# (topic id, partition) -> (topic name, high watermark), None when the partition is not served here.
PartitionEnd = Callable[[bytes, int], tuple[str, int] | None]


def share_families(shards: GroupCoordinatorService, service: SharePartitionManager | None,
                   partition_end: PartitionEnd | None = None) -> Iterator[Family]:
    states: Counter[str] = Counter({"Empty": 0, "Stable": 0})
    members = 0
    for runtime in shards.runtimes:
        if runtime.loaded:
            for sgroup in runtime.shard.state.share_groups.values():
                states[sgroup.state] += 1
                members += len(sgroup.members)
    in_flight: Counter[tuple[str, str]] = Counter()
    redelivered: Counter[str] = Counter()
    expired: Counter[str] = Counter()
    archived: Counter[str] = Counter()
    lag: list[tuple[list[str], float]] = []
    for (group, topic_id, index), sp in ({} if service is None else service.partitions).items():
        end = None if partition_end is None or not sp.initialized else partition_end(topic_id, index)
        if end is not None:
            done = sum(1 for r in sp.records.values() if r.state in (ACKNOWLEDGED, ARCHIVED))
            lag.append(([group, end[0], str(index)], float(max(0, end[1] - sp.start_offset - done))))
        for rec in sp.records.values():
            if rec.state == ACQUIRED:
                in_flight[(group, "acquired")] += 1
            elif rec.state == AVAILABLE:
                in_flight[(group, "available")] += 1
        redelivered[group] += sp.redelivered
        expired[group] += sp.lock_expiries
        archived[group] += sp.archived_at_limit
    yield ("kcoord_share_groups", "Share groups by state.", ["state"],
           [([s], float(n)) for s, n in sorted(states.items())])
    yield ("kcoord_share_group_members", "Members across all share groups.", [], [([], float(members))])
    yield ("kcoord_share_records_in_flight", "Records of a share group's share partitions acquired or "
           "available for another delivery.", ["group", "state"],
           [([g, s], float(n)) for (g, s), n in sorted(in_flight.items())])
    yield ("kcoord_share_group_lag", "Records of a share partition from its start offset to the partition's "
           "end not yet acknowledged or archived.", ["group", "topic", "partition"], sorted(lag))
    yield ("kcoord_share_redeliveries", "Records delivered again to a share group since its share partitions "
           "were loaded.", ["group"], [([g], float(n)) for g, n in sorted(redelivered.items())])
    yield ("kcoord_share_lock_expiries", "Acquisition locks that expired since the share partitions were "
           "loaded.", ["group"], [([g], float(n)) for g, n in sorted(expired.items())])
    yield ("kcoord_share_archived_at_delivery_limit", "Records archived at the delivery limit since the share "
           "partitions were loaded.", ["group"], [([g], float(n)) for g, n in sorted(archived.items())])
