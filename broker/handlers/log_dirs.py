"""DescribeLogDirs and AlterReplicaLogDirs for a broker with one log directory, as Kafka 4.4
answers them (KafkaApis, ReplicaManager.describeLogDirs and alterReplicaLogDirs).

DescribeLogDirs lists the directory (its absolute path, as Kafka gives it) with the bytes of the
segments of each partition open here, an offset lag of 0 (this node leads every partition it
holds, with nothing beyond the high watermark to catch up on) and, v4+, the volume's total and
usable bytes. AlterReplicaLogDirs has nowhere to move a replica: a directory that is not the log
directory is LOG_DIR_NOT_FOUND, and the log directory itself leaves a replica where it is, which
Kafka answers with no error.
"""

from __future__ import annotations

import os
from pathlib import Path

from broker.network.router import Request
from broker.topics.catalog import TopicCatalog
from broker.topics.partitions import TopicLogs
from protocol.errors import ErrorCode
from protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from storage.layout import partition_dir_name

# Kafka names a replica being moved "<topic>-<partition>.<32 hex digits>-future" and refuses a
# move whose name would pass the file system's 255 bytes (KAFKA-4893).
_FUTURE_SUFFIX = len(".") + 32 + len("-future")
_MAX_FILE_NAME = 255

LogDirResult = DescribeLogDirsResponse.Result
MoveResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult


def volume_bytes(path: Path) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding ``path``: what Java's FileStore reports
    (usable: the blocks available to an unprivileged user)."""
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


class LogDirApis:
    """DescribeLogDirs and AlterReplicaLogDirs over the one log directory."""

    def __init__(self, data_dir: Path, topic_logs: TopicLogs, catalog: TopicCatalog) -> None:
        self.log_dir = os.path.abspath(data_dir)
        self.topic_logs = topic_logs
        self.catalog = catalog

    def describe_log_dirs(self, req: Request[DescribeLogDirsRequest]) -> None:
        logs = self.topic_logs.runtime.manager.logs()
        asked = None if req.body.topics is None else {
            (t.topic, p) for t in req.body.topics for p in t.partitions}
        by_topic: dict[str, list[LogDirResult.Topic.Partition]] = {}
        for (topic, partition), log in sorted(logs.items()):
            if asked is not None and (topic, partition) not in asked:
                continue
            by_topic.setdefault(topic, []).append(LogDirResult.Topic.Partition(
                partition_index=partition, partition_size=log.size_bytes, offset_lag=0, is_future_key=False))
        result = LogDirResult(error_code=0, log_dir=self.log_dir, topics=[
            LogDirResult.Topic(name=name, partitions=parts) for name, parts in by_topic.items()])
        try:
            result.total_bytes, result.usable_bytes = volume_bytes(Path(self.log_dir))
        except OSError:
            result = LogDirResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=self.log_dir, topics=[])
        req.reply.set(DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[result]))

    def alter_replica_log_dirs(self, req: Request[AlterReplicaLogDirsRequest]) -> None:
        by_topic: dict[str, list[MoveResult.AlterReplicaLogDirPartitionResult]] = {}
        for d in req.body.dirs:
            for t in d.topics:
                for p in t.partitions:
                    by_topic.setdefault(t.name, []).append(MoveResult.AlterReplicaLogDirPartitionResult(
                        partition_index=p, error_code=self._move(d.path, t.name, p)))
        req.reply.set(AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
            MoveResult(topic_name=name, partitions=parts) for name, parts in by_topic.items()]))

    def _move(self, path: str, topic_name: str, partition: int) -> int:
        if len(partition_dir_name(topic_name, partition)) + _FUTURE_SUFFIX > _MAX_FILE_NAME:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        if path != self.log_dir:
            return ErrorCode.LOG_DIR_NOT_FOUND
        topic = self.catalog.get(topic_name)
        if topic is None or not 0 <= partition < topic.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        held = self.topic_logs.readable(topic, partition)
        if isinstance(held, int):
            # Kafka keeps REPLICA_NOT_AVAILABLE here for a partition it does not host.
            return ErrorCode.REPLICA_NOT_AVAILABLE
        return ErrorCode.NONE
