"""What a group has committed, as a client reads it back."""

from __future__ import annotations

from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """Every offset the group has committed (OffsetFetch for all topics), as the admin client reads it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(15)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}
