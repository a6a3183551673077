"""A share partition's trouble with deliveries as rebalance-journal events of its share group.

Pure: the shell takes a share partition's ``DeliveryTrouble`` after each fetch, acknowledgement
or expiry round and turns it here into at most two events (``delivery`` kind): the records
archived because they reached the delivery limit (``delivery-limit-reached``, poison records),
and the acquisition locks that expired before their member acknowledged
(``acquisition-lock-expired``). Offsets are named as ranges, a bounded number of them; the
counts are whole.
"""

from __future__ import annotations

from typing import Any

from broker.share_partitions.core.partition import DeliveryTrouble, Limits
from protocol.group_events import DELIVERY, DELIVERY_LIMIT, LOCK_EXPIRED, GroupEvent

# How many offset ranges and members an event names.
MAX_RANGES = 50
MAX_MEMBERS = 20


def offset_ranges(offsets: list[int], limit: int = MAX_RANGES) -> list[list[int]]:
    """``[[first, last], ...]`` covering ``offsets``, the first ``limit`` runs."""
    out: list[list[int]] = []
    for offset in sorted(set(offsets)):
        if out and out[-1][1] == offset - 1:
            out[-1][1] = offset
        elif len(out) >= limit:
            break
        else:
            out.append([offset, offset])
    return out


def delivery_events(group: str, topic: str, partition: int, trouble: DeliveryTrouble, limits: Limits, now_ms: int,
                    generation: int = -1, state: str = "Stable") -> list[GroupEvent]:
    """The journal events of one round's trouble on share partition ``topic``-``partition`` of
    ``group`` (``generation``/``state``: the group's epoch and state where known, -1 otherwise)."""
    members = sorted(trouble.members, key=lambda m: (-trouble.members[m], m))[:MAX_MEMBERS]
    only = members[0] if len(trouble.members) == 1 and members[0] else None
    common: dict[str, Any] = {"topic": topic, "partition": partition, "members": members,
                              "delivery_limit": limits.delivery_limit, "lock_duration_ms": limits.lock_ms}
    events: list[GroupEvent] = []
    if trouble.expired:
        events.append(GroupEvent(DELIVERY, group, "share", generation, state, state, now_ms, LOCK_EXPIRED, only, {
            **common, "records": trouble.expired, "offsets": offset_ranges(trouble.expired_offsets),
            "max_delivery_count": trouble.max_delivery_count}))
    if trouble.archived:
        events.append(GroupEvent(DELIVERY, group, "share", generation, state, state, now_ms, DELIVERY_LIMIT, only, {
            **common, "records": trouble.archived, "offsets": offset_ranges(trouble.archived_offsets),
            "released_by": dict(sorted(trouble.archived_via.items()))}))
    return events
