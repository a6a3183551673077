"""One share partition's durable state as the share coordinator holds it. How its state batches
combine is the records' own rule (``protocol.share_state_batches``), shared with the analysis."""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.share_state_batches import StateBatch as StateBatch
from protocol.share_state_batches import combine as combine


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
