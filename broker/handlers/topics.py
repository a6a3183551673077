"""CreateTopics and DeleteTopics against the topic catalog (single node: replication factor 1)."""

from __future__ import annotations

from broker.network.router import Request
from broker.runtime.countdown import Countdown
from broker.topics.admin import TopicAdmin
from broker.topics.catalog import TopicCatalog, TopicError
from protocol.errors import ErrorCode
from protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse


class TopicApis:
    """CreateTopics and DeleteTopics, over the topic admin."""

    def __init__(self, admin: TopicAdmin, catalog: TopicCatalog, default_partitions: int) -> None:
        self.admin = admin
        self.catalog = catalog
        self.default_partitions = default_partitions
    def create_topics(self, req: Request[CreateTopicsRequest]) -> None:
        results = []
        for t in req.body.topics:
            partitions = t.num_partitions
            if t.assignments:
                partitions = len(t.assignments)
            if partitions == -1:
                partitions = self.default_partitions
            rf = t.replication_factor
            configs = {c.name: c.value for c in t.configs if c.value is not None}
            result = CreateTopicsResponse.CreatableTopicResult(name=t.name, error_code=0, error_message=None)
            if rf not in (-1, 1) and not t.assignments:
                result.error_code = ErrorCode.INVALID_REPLICATION_FACTOR
                result.error_message = f"Unable to replicate the partition {rf} time(s): The target " \
                                       f"replication factor of {rf} cannot be reached because only 1 broker(s) " \
                                       "are registered."
            else:
                try:
                    topic = self.admin.create_topic(t.name, partitions, configs, validate_only=req.body.validate_only)
                except TopicError as exc:
                    result.error_code = exc.error_code
                    result.error_message = str(exc)
                else:
                    result.topic_id = topic.topic_id
                    result.num_partitions = topic.partitions
                    result.replication_factor = 1
                    result.configs = [CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs(
                        name=k, value=v, read_only=False, config_source=1 if k in topic.configs else 5,
                        is_sensitive=False)
                        for k, v in sorted(self.admin.topic_configs(topic).items())]
            results.append(result)
        req.reply.set(CreateTopicsResponse(topics=results))

    def delete_topics(self, req: Request[DeleteTopicsRequest]) -> None:
        body = req.body
        if req.version >= 6:
            wanted = [(t.name, t.topic_id) for t in body.topics]
        else:
            wanted = [(name, bytes(16)) for name in body.topic_names]
        results: list[DeleteTopicsResponse.DeletableTopicResult] = []
        # Answered once every deleted topic's committed offsets are tombstoned durably in every
        # group: a client that deletes a topic and recreates it must not read back the offsets
        # of the topic it deleted, nor find them again after a restart.
        settled = Countdown(0, lambda _ok: req.reply.set(DeleteTopicsResponse(responses=results)), started=False)
        for name, topic_id in wanted:
            if name is None:
                topic = self.catalog.by_id.get(topic_id)
                name = topic.name if topic else None
            result = DeleteTopicsResponse.DeletableTopicResult(name=name, topic_id=topic_id, error_code=0)
            if name is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                result.error_message = "unknown topic id"
            else:
                try:
                    topic = self.admin.delete_topic(name, settled)
                    result.topic_id = topic.topic_id
                except TopicError as exc:
                    result.error_code = exc.error_code
                    result.error_message = str(exc)
            results.append(result)
        settled.start()
