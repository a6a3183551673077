"""One share partition's durable state as the share coordinator holds it, and how state batches
combine: a newer batch wins over what it overlaps, nothing below the start offset is kept, and
neighbours with the same state and delivery count are one batch."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple


class StateBatch(NamedTuple):
    first: int
    last: int
    state: int  # 0 available, 2 acknowledged, 4 archived
    deliveries: int  # delivery count


@dataclass(frozen=True)
class ShareGroupOffset:
    """What ``__share_group_state`` says of one share partition (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = -1
    create_timestamp: int = 0
    write_timestamp: int = 0
    batches: tuple[StateBatch, ...] = field(default_factory=tuple)


def combine(older: Iterable[StateBatch], newer: Iterable[StateBatch], start_offset: int) -> tuple[StateBatch, ...]:
    """``older`` overlaid with ``newer`` (newer wins offset by offset), cut at ``start_offset``,
    sorted and with equal neighbours joined."""
    pieces: list[StateBatch] = [b for b in older if b.last >= b.first]
    for new in newer:
        if new.last < new.first:
            continue
        kept: list[StateBatch] = []
        for b in pieces:
            if b.last < new.first or b.first > new.last:
                kept.append(b)
                continue
            if b.first < new.first:
                kept.append(b._replace(last=new.first - 1))
            if b.last > new.last:
                kept.append(b._replace(first=new.last + 1))
        kept.append(new)
        pieces = kept
    out: list[StateBatch] = []
    for b in sorted(pieces):
        if start_offset >= 0 and b.last < start_offset:
            continue
        if start_offset >= 0 and b.first < start_offset:
            b = b._replace(first=start_offset)
        if out and out[-1].last == b.first - 1 and out[-1].state == b.state and out[-1].deliveries == b.deliveries:
            out[-1] = out[-1]._replace(last=b.last)
        else:
            out.append(b)
    return tuple(out)
