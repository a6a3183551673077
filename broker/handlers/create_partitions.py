"""CreatePartitions: grows topics, with the checks and error codes of Kafka's controller
(``ControllerApis.createPartitions`` and ``ReplicationControlManager.createPartitions``).

This broker is a one-node cluster with replication factor 1, so an explicit assignment fits only
when it names this broker, once, for each new partition. The new partitions exist once the topic
catalog has persisted the new count: Metadata shows them at once (a classic group's leader sees
them and rejoins, which is how Kafka's classic groups pick up new partitions) and Produce, Fetch
and ListOffsets serve them.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.network.router import Request
from broker.topics.catalog import Topic, TopicCatalog
from protocol.errors import ErrorCode
from protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse

# Kafka's controller builds at most this many records per request (QuorumController's
# MAX_RECORDS_PER_USER_OP, one record per new partition); more fails the topic that overflows.
MAX_NEW_PARTITIONS_PER_REQUEST = 10_000
REPLICATION_FACTOR = 1

Result = CreatePartitionsResponse.TopicResult


class Refused(Exception):
    def __init__(self, error_code: int, message: str | None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def _check_assignment(broker_ids: list[int], node_id: int) -> None:
    """Kafka's ``validateManualPartitionAssignment`` against a cluster of one broker."""
    if not broker_ids:
        raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      "The manual partition assignment includes an empty replica list.")
    previous: int | None = None
    for broker_id in sorted(broker_ids):
        if broker_id != node_id:
            raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                          f"The manual partition assignment includes broker {broker_id}, but no such broker "
                          "is registered.")
        if broker_id == previous:
            raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                          f"The manual partition assignment includes the broker {broker_id} more than once.")
        previous = broker_id
    if len(broker_ids) != REPLICATION_FACTOR:
        raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      f"The manual partition assignment includes a partition with {len(broker_ids)} replica(s), "
                      f"but this is not consistent with previous partitions, which have {REPLICATION_FACTOR} "
                      "replica(s).")


def check_growth(catalog: TopicCatalog, node_id: int, topic: CreatePartitionsRequest.Topic,
                 budget: int) -> int:
    """How many partitions ``topic`` adds, or ``Refused`` with Kafka's code and message."""
    current = catalog.get(topic.name)
    if current is None:
        raise Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
    if current.internal:
        # Kafka's controller would grow __consumer_offsets, and every group whose partition then
        # changes would lose its coordinator state; Kafka's own tools refuse it (client-side).
        # Here the broker refuses it itself.
        raise Refused(ErrorCode.INVALID_TOPIC_EXCEPTION,
                      "The number of partitions for the offsets topic cannot be changed.")
    have = current.partitions
    if topic.count == have:
        raise Refused(ErrorCode.INVALID_PARTITIONS, f"Topic already has {have} partition(s).")
    if topic.count < have:
        raise Refused(ErrorCode.INVALID_PARTITIONS,
                      f"The topic {topic.name} currently has {have} partition(s); {topic.count} would not be "
                      "an increase.")
    additional = topic.count - have
    if topic.assignments is not None:
        if len(topic.assignments) != additional:
            raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                          f"Attempted to add {additional} additional partition(s), but only "
                          f"{len(topic.assignments)} assignment(s) were specified.")
        for assignment in topic.assignments:
            _check_assignment(list(assignment.broker_ids), node_id)
    if additional > budget:
        raise Refused(ErrorCode.UNKNOWN_SERVER_ERROR,
                      f"Cannot add another {additional} element(s) to the list because it would exceed the "
                      f"maximum length of {MAX_NEW_PARTITIONS_PER_REQUEST}")
    return additional


class CreatePartitionsApi:
    """CreatePartitions, over the topic catalog and the topic admin."""

    def __init__(self, catalog: TopicCatalog, node_id: int, grow_topic: Callable[[str, int], Topic]) -> None:
        self.catalog = catalog
        self.node_id = node_id
        self.grow_topic = grow_topic
    def create_partitions(self, req: Request[CreatePartitionsRequest]) -> None:
        body = req.body
        seen: dict[str, int] = {}
        for t in body.topics:
            seen[t.name] = seen.get(t.name, 0) + 1
        # As Kafka's controller answers: duplicated names first (once each), then the others.
        results = [Result(name=name, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic name.")
                   for name, n in seen.items() if n > 1]
        budget = MAX_NEW_PARTITIONS_PER_REQUEST
        for t in body.topics:
            if seen[t.name] > 1:
                continue
            result = Result(name=t.name, error_code=ErrorCode.NONE, error_message=None)
            try:
                budget -= check_growth(self.catalog, self.node_id, t, budget)
                if not body.validate_only:
                    self.grow_topic(t.name, t.count)
            except Refused as exc:
                result.error_code, result.error_message = exc.error_code, exc.message
            except OSError as exc:
                result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                result.error_message = f"the topic catalog could not be written: {exc}"
            results.append(result)
        req.reply.set(CreatePartitionsResponse(throttle_time_ms=0, results=results))
