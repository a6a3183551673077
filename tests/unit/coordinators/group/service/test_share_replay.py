"""A log whose batches hold only share-group records replays them at load (they always matter to
the replay plan, like consumer-group records), and a share group deleted by its metadata's
tombstone stays deleted."""

from __future__ import annotations

from pathlib import Path

from broker.coordinators.group.core.base.context import CoordinatorConfig
from broker.coordinators.group.core.base.records import encode_record
from broker.coordinators.group.core.shard import GroupCoordinatorShard
from broker.coordinators.group.service.replay_plan import replay_log
from protocol.messages.offsets_log_share_groups import ShareGroupMemberMetadataValue, ShareGroupMetadataValue
from protocol.payloads.offsets_log_records import ShareGroupMemberMetadataRecord, ShareGroupMetadataRecord
from storage.config import LogConfig
from storage.partition_log import PartitionLog


class NoTopics:
    def partition_count(self, topic: str) -> int | None:
        return None

    def topic_id(self, topic: str) -> bytes | None:
        return None


def test_share_group_records_are_replayed(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path / "log", LogConfig.offsets_topic())
    member = ShareGroupMemberMetadataValue(rack_id=None, client_id="c", client_host="/h", subscribed_topic_names=["t"])
    for record in (ShareGroupMemberMetadataRecord("kept", "m", member),
                   ShareGroupMetadataRecord("kept", ShareGroupMetadataValue(epoch=2, metadata_hash=0)),
                   ShareGroupMetadataRecord("gone", ShareGroupMetadataValue(epoch=2, metadata_hash=0)),
                   ShareGroupMetadataRecord("gone", None)):
        log.append([(*encode_record(record), 1000)])
    shard = GroupCoordinatorShard(0, CoordinatorConfig(num_partitions=1), NoTopics(), lambda p: p)  # type: ignore[arg-type]
    read, replayed = replay_log(log.batches, shard.replay)
    log.close()
    assert (read, replayed) == (4, 4)
    groups = shard.state.share_groups
    assert list(groups) == ["kept"]
    assert groups["kept"].group_epoch == 2 and list(groups["kept"].members) == ["m"]
