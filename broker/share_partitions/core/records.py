"""A share partition's durable state as the share coordinator writes it in
``__share_group_state`` (Kafka's key ``group:topic id:partition``): a ShareSnapshot of the whole
state, or a ShareUpdate of what changed since the last write (its start offset and the changed
records), replayed in order at load. An acquired record is written as available with its
delivery count: after a restart it is delivered again, and counted."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from broker.share_partitions.core.partition import ACQUIRED, AVAILABLE, InFlight, SharePartition
from protocol.messages.share_state_log import ShareSnapshotValue, ShareUpdateValue

_Batch = ShareSnapshotValue.StateBatch
_UpdateBatch = ShareUpdateValue.StateBatch


def state_batches(sp: SharePartition, offsets: Iterable[int] | None = None, batch: Any = _Batch) -> list[Any]:
    """The records at ``offsets`` (every one in flight when None) as runs of equal state."""
    out: list[Any] = []
    for offset in sorted(sp.records if offsets is None else (o for o in offsets if o in sp.records)):
        rec = sp.records[offset]
        state = AVAILABLE if rec.state == ACQUIRED else rec.state
        if out and out[-1].last_offset == offset - 1 and out[-1].delivery_state == state \
                and out[-1].delivery_count == rec.delivery_count:
            out[-1].last_offset = offset
        else:
            out.append(batch(first_offset=offset, last_offset=offset, delivery_state=state,
                             delivery_count=rec.delivery_count))
    return out


def snapshot(sp: SharePartition, state_epoch: int, snapshot_epoch: int, now_ms: int, created_ms: int) -> Any:
    return ShareSnapshotValue(snapshot_epoch=snapshot_epoch, state_epoch=state_epoch, leader_epoch=0,
                              start_offset=sp.start_offset, delivery_complete_count=-1,
                              create_timestamp=created_ms, write_timestamp=now_ms, state_batches=state_batches(sp))


def update(sp: SharePartition, snapshot_epoch: int) -> Any:
    """What changed since the last write: the start offset and the records changed that are
    still in flight (those below the start offset are done, the start offset says so)."""
    return ShareUpdateValue(snapshot_epoch=snapshot_epoch, leader_epoch=0, start_offset=sp.start_offset,
                            delivery_complete_count=-1,
                            state_batches=state_batches(sp, sp.changed, _UpdateBatch))


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
