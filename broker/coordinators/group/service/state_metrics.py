"""Scrape-time gauges that describe the broker's state: groups, members, offsets, logs, shards."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from broker.coordinators.group.core.base.classic_group import GroupState
from broker.coordinators.group.core.consumer.group import ConsumerGroupState
from broker.coordinators.group.service.coordinator import GroupCoordinatorService
from broker.coordinators.group.service.journal_writer import JournalWriter

STREAMS_STATES = ("Empty", "NotReady", "Assigning", "Reconciling", "Stable")
Family = tuple[str, str, list[str], list[tuple[list[str], float]]]


def doctor_families(journal: JournalWriter) -> Iterator[Family]:
    yield ("kcoord_doctor_findings", "Groups for which the doctor has a finding, by rule (over the recent "
           "rebalance-journal events).", ["rule"],
           [([rule], float(n)) for rule, n in sorted(journal.findings_by_rule().items())])


def state_families(shards: GroupCoordinatorService) -> Iterator[Family]:
    states: Counter[str] = Counter({s.value: 0 for s in GroupState})
    consumer_states: Counter[str] = Counter({s.value: 0 for s in ConsumerGroupState if s.value != "Dead"})
    consumer_members = 0
    # Streams groups (KIP-1071), by Kafka's StreamsGroupState names.
    streams_states: Counter[str] = Counter({s: 0 for s in STREAMS_STATES})
    streams_members = 0
    members = parked_join = parked_sync = offsets = 0
    log_size: list[tuple[list[str], float]] = []
    log_segments: list[tuple[list[str], float]] = []
    log_end: list[tuple[list[str], float]] = []
    for runtime in shards.runtimes:
        part = [str(runtime.partition)]
        if runtime.part is not None:
            log = runtime.part.log
            log_size.append((part, float(log.size_bytes)))
            log_segments.append((part, float(log.segment_count)))
            log_end.append((part, float(log.end_offset)))
        if not runtime.loaded:
            continue
        st: Any = runtime.shard.state
        for group in st.groups.values():
            states[group.state.value] += 1
            members += len(group.members)
            for m in group.members.values():
                parked_join += m.awaiting_join is not None
                parked_sync += m.awaiting_sync is not None
        offsets += st.offsets.count()
        for cgroup in st.consumer_groups.values():
            consumer_states[cgroup.state.value] += 1
            consumer_members += len(cgroup.members)
        for sgroup in st.streams.groups.values():
            streams_states[sgroup.state_name()] += 1
            streams_members += len(sgroup.members)
    yield ("kcoord_groups", "Groups by state.", ["state"], [([s], float(n)) for s, n in sorted(states.items())])
    yield ("kcoord_group_members", "Members across all groups.", [], [([], float(members))])
    yield ("kcoord_consumer_groups", "KIP-848 consumer groups by state.", ["state"],
           [([s], float(n)) for s, n in sorted(consumer_states.items())])
    yield ("kcoord_consumer_group_members", "Members across all KIP-848 consumer groups.", [],
           [([], float(consumer_members))])
    yield ("kcoord_streams_groups", "KIP-1071 streams groups by state.", ["state"],
           [([s], float(n)) for s, n in sorted(streams_states.items())])
    yield ("kcoord_streams_group_members", "Members across all streams groups.", [], [([], float(streams_members))])
    yield ("kcoord_parked_requests", "JoinGroup/SyncGroup requests waiting for the rebalance.", ["kind"],
           [(["join"], float(parked_join)), (["sync"], float(parked_sync))])
    yield ("kcoord_offsets", "Committed offsets held.", [], [([], float(offsets))])
    yield ("kcoord_shards_loading", "__consumer_offsets partitions still replaying.", [],
           [([], float(shards.loading))])
    yield ("kcoord_log_size_bytes", "Bytes on disk per __consumer_offsets partition.", ["partition"], log_size)
    yield ("kcoord_log_segments", "Segment files per __consumer_offsets partition.", ["partition"], log_segments)
    yield ("kcoord_log_end_offset", "Next offset to be written per __consumer_offsets partition.", ["partition"],
           log_end)
