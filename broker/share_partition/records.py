"""A share partition's durable state as the share coordinator writes it in
``__share_group_state``: a ShareSnapshot of the whole state (Kafka's key ``group:topic id:
partition``), replayed at load. An acquired record is written as available with its delivery
count: after a restart it is delivered again, and counted."""

from __future__ import annotations

from typing import Any

from broker.share_partition.partition import ACQUIRED, AVAILABLE, InFlight, SharePartition
from protocol.messages.share_state_log import ShareSnapshotValue, ShareUpdateValue

_Batch = ShareSnapshotValue.StateBatch


def state_batches(sp: SharePartition) -> list[Any]:
    out: list[Any] = []
    for offset in sorted(sp.records):
        rec = sp.records[offset]
        state = AVAILABLE if rec.state == ACQUIRED else rec.state
        if out and out[-1].last_offset == offset - 1 and out[-1].delivery_state == state \
                and out[-1].delivery_count == rec.delivery_count:
            out[-1].last_offset = offset
        else:
            out.append(_Batch(first_offset=offset, last_offset=offset, delivery_state=state,
                              delivery_count=rec.delivery_count))
    return out


def snapshot(sp: SharePartition, state_epoch: int, snapshot_epoch: int, now_ms: int, created_ms: int) -> Any:
    return ShareSnapshotValue(snapshot_epoch=snapshot_epoch, state_epoch=state_epoch, leader_epoch=0,
                              start_offset=sp.start_offset, delivery_complete_count=-1,
                              create_timestamp=created_ms, write_timestamp=now_ms, state_batches=state_batches(sp))


def load(value: Any) -> SharePartition:
    """A share partition from its snapshot: acquired records come back available."""
    sp = SharePartition(start_offset=value.start_offset, next_offset=value.start_offset)
    _apply_batches(sp, value.state_batches)
    return sp


def apply_update(sp: SharePartition, value: Any) -> None:
    """A ShareUpdate on top of the state: its start offset and batches replace what they cover."""
    if isinstance(value, ShareUpdateValue) and value.start_offset >= 0:
        sp.move_start(value.start_offset)
    _apply_batches(sp, value.state_batches)


def _apply_batches(sp: SharePartition, batches: list[Any]) -> None:
    for b in batches:
        for offset in range(max(b.first_offset, sp.start_offset), b.last_offset + 1):
            sp.records[offset] = InFlight(b.delivery_state, b.delivery_count)
        sp.next_offset = max(sp.next_offset, b.last_offset + 1)
    sp.advance()
