"""State batches of ``__share_group_state`` records and how they combine: a newer batch wins over
what it overlaps, nothing below the start offset is kept, and neighbours with the same state and
delivery count are one batch. The share coordinator folds its records with this, and so does the
analysis that reads them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple


class StateBatch(NamedTuple):
    first: int
    last: int
    state: int  # 0 available, 2 acknowledged, 4 archived
    deliveries: int  # delivery count


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
