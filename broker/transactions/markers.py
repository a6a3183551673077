"""Writes transaction markers through the one log runtime: to data partitions through the data
plane (which moves their last stable offset once a marker is durable), to ``__consumer_offsets``
partitions through their group coordinator shard (which applies or drops the transaction's pending
offsets). Kafka's TransactionMarkerChannelManager, without the network: every partition is local."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from broker.coordinator.result import Result
from broker.coordinator.shard import GroupCoordinatorShard
from broker.groups.shards import ShardManager
from broker.topics.catalog import OFFSETS_TOPIC
from broker.topics.partitions import TopicLogs
from broker.txn_coordinator.coordinator import MarkerJob
from broker.txn_coordinator.metadata import TopicPartition

# A single node is the only coordinator there has been: its epoch is 0.
COORDINATOR_EPOCH = 0


def _marker_op(job: MarkerJob, shard: GroupCoordinatorShard, now: int) -> Result:
    del now
    return shard.write_txn_marker(job.producer_id, job.producer_epoch, job.commit, COORDINATOR_EPOCH)


class MarkerWriter:
    def __init__(self, topic_logs: TopicLogs, shards: ShardManager) -> None:
        self.topic_logs = topic_logs
        self.shards = shards

    def write(self, job: MarkerJob, tp: TopicPartition, done: Callable[[bool], None]) -> None:
        """Writes ``job``'s marker to ``tp``; ``done(ok)`` once it is durable. A partition that no
        longer exists (its topic was deleted) needs no marker: ``done(True)`` at once."""
        topic, partition = tp
        if topic == OFFSETS_TOPIC:
            if not 0 <= partition < len(self.shards.runtimes):
                done(True)
                return
            self.shards.runtimes[partition].run_broker_op(partial(_marker_op, job), done)
            return
        state = self.topic_logs.get(topic, partition)
        if state is None or state.deleted:
            done(True)
            return
        self.topic_logs.write_marker(state, job.producer_id, job.producer_epoch, job.commit, COORDINATOR_EPOCH, done)
