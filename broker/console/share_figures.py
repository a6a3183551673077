"""A share group's delivery figures on its console page: records in flight (acquired, or available
for another delivery), redeliveries, expired acquisition locks and records archived at the
delivery limit (poison records), as this node's share metrics count them (``broker/share_partitions/service/metrics.py``,
computed from its share partitions when asked); and the records whose acquisition locks are held,
each with its member, its deliveries and when its lock expires, read from the same share partitions.
Share partitions are served by one node: the node whose console is open shows its own."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from broker.coordinators.group.service.state_metrics import Family
from broker.share_partitions.core.partition import ACQUIRED

# The held locks a page lists: those that expire first (a share partition holds up to
# group.share.partition.max.record.locks of them).
HELD_SHOWN = 50

# Metric family -> the figure it gives (a family with a state label gives one figure per state).
FIGURES = {
    "kcoord_share_records_in_flight": "in flight",
    "kcoord_share_redeliveries": "redelivered",
    "kcoord_share_lock_expiries": "lock expiries",
    "kcoord_share_archived_at_delivery_limit": "archived at the delivery limit",
}
ORDER = ("in flight: acquired", "in flight: available", "redelivered", "lock expiries",
         "archived at the delivery limit")


def share_figures(families: Iterable[Family], group_id: str) -> dict[str, int]:
    """The figures of ``group_id`` (each of ``ORDER``, 0 when its partitions counted none)."""
    out = dict.fromkeys(ORDER, 0)
    for name, _help, labels, samples in families:
        figure = FIGURES.get(name)
        if figure is None:
            continue
        for values, value in samples:
            by_label = dict(zip(labels, values, strict=True))
            if by_label.get("group") != group_id:
                continue
            key = f"{figure}: {by_label['state']}" if "state" in by_label else figure
            if key in out:
                out[key] += int(value)
    return out


class _Record(Protocol):
    @property
    def state(self) -> int: ...
    @property
    def member(self) -> str: ...
    @property
    def delivery_count(self) -> int: ...
    @property
    def deadline_ms(self) -> int: ...


class _SharePartition(Protocol):
    @property
    def records(self) -> Mapping[int, _Record]: ...


@dataclass(frozen=True, order=True)
class HeldLock:
    """A record a member holds the acquisition lock of: ``expires_in_ms`` from when it was read."""

    expires_in_ms: int
    topic: str
    partition: int
    offset: int
    member: str
    delivery_count: int


@dataclass
class ShareDeliveries:
    """What a share group's page shows of its deliveries on this node."""

    figures: dict[str, int]
    held: int = 0  # records whose acquisition lock is held, in all
    first_to_expire: list[HeldLock] = field(default_factory=list)  # at most HELD_SHOWN, soonest first


def held_locks(partitions: Mapping[tuple[str, bytes, int], _SharePartition], group_id: str,
               topic_name: Callable[[bytes, int], str | None], now_ms: int,
               shown: int = HELD_SHOWN) -> tuple[int, list[HeldLock]]:
    """How many records of ``group_id``'s share partitions are acquired, and the ``shown`` whose
    locks expire first (``now_ms`` on the clock the locks are timed on)."""
    held: list[HeldLock] = []
    total = 0
    for (group, topic_id, index), sp in partitions.items():
        if group != group_id:
            continue
        topic = topic_name(topic_id, index) or topic_id.hex()
        for offset, rec in sp.records.items():
            if rec.state == ACQUIRED:
                total += 1
                held.append(HeldLock(rec.deadline_ms - now_ms, topic, index, offset, rec.member,
                                     rec.delivery_count))
    return total, heapq.nsmallest(shown, held)
