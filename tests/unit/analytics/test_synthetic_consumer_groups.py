"""The synthetic log generator writes KIP-848 groups as the records a Kafka 4.1 coordinator writes,
and the decoder reads them back."""

from __future__ import annotations

from pathlib import Path

from analytics.decoder import decode_segment
from analytics.synthetic import write_synthetic_log


def test_consumer_groups_are_written_as_consumer_group_records(tmp_path: Path) -> None:
    stats = write_synthetic_log(tmp_path, commits=240, groups=2, topics=2, partitions=3, log_partitions=1,
                                rebalance_every=60, consumer_groups=1)
    assert stats["group_records"] > 0 and stats["consumer_group_records"] > 0
    data = (tmp_path / "__consumer_offsets-0" / "00000000000000000000.log").read_bytes()
    rows = [r for chunk in decode_segment(data) for r in chunk.consumer_groups]
    assert len(rows) == stats["consumer_group_records"]
    assert {r.group for r in rows} == {"group-000"}
    epochs = [r for r in rows if r.record_type == "ConsumerGroupMetadata"]
    assert [r.epoch for r in epochs] == list(range(1, len(epochs) + 1))
    current = [r for r in rows if r.record_type == "ConsumerGroupCurrentMemberAssignment"]
    # Every partition of every topic is owned by exactly one member after each rebalance.
    last_epoch = max(r.epoch for r in current)
    owned = sorted((a["topic_id"], p) for r in current if r.epoch == last_epoch
                   for a in r.assignment for p in a["partitions"])
    assert len(owned) == len(set(owned)) == 2 * 3
