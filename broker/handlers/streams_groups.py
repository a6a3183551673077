"""StreamsGroupHeartbeat, StreamsGroupDescribe (KIP-1071) and StreamsGroupTopologyDescriptionUpdate
(KIP-1331), over the group coordinator's shards.

The heartbeat runs on the group's shard like every group operation; the internal topics its
topology needs and that do not exist yet (the coordinator lists them) are created here once the
answer is durable, as Kafka's ``KafkaApis`` has its ``AutoTopicCreationManager`` create them: the
principal needs CREATE on the cluster or on each topic, and a topic it may not create is reported
in the MISSING_INTERNAL_TOPICS status instead."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.coordinators.group.core import streams_describe
from broker.coordinators.group.core.base.context import RequestContext
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.shard import GroupCoordinatorShard
from broker.coordinators.group.core.streams.topology import MISSING_INTERNAL_TOPICS, InternalTopic
from broker.coordinators.group.core.streams_heartbeat import error_response
from broker.coordinators.group.core.streams_topology_description import update_response
from broker.coordinators.group.service.coordinator import GroupCoordinatorService
from broker.handlers.groups import GroupRouting
from broker.network.router import Request
from broker.observability import logs
from broker.security.acl_model import CLUSTER_NAME, Operation, ResourceType, all_operations
from broker.security.authorizer import Authorizer
from broker.topics.admin import TopicAdmin
from broker.topics.catalog import TopicError
from broker.topics.partitions import KAFKA_TOPIC_CONFIGS
from protocol.errors import ErrorCode
from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest, StreamsGroupDescribeResponse
from protocol.messages.streams_group_heartbeat import (
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
)
from protocol.messages.streams_group_topology_description_update import (
    StreamsGroupTopologyDescriptionUpdateRequest,
    StreamsGroupTopologyDescriptionUpdateResponse,
)

# (principal, host) -> may it create this topic? None: no authorizer, every topic may be created.
MayCreate = Callable[[str, str], Callable[[str], bool]]


def may_create_topics(authorizer: Authorizer) -> MayCreate:
    """CREATE on the cluster, or else on the topic: what Kafka asks before it creates a streams
    group's internal topics."""
    def for_principal(principal: str, host: str) -> Callable[[str], bool]:
        on_cluster = authorizer.authorize(principal, host, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)

        def may_create(topic: str) -> bool:
            return on_cluster or authorizer.authorize(principal, host, Operation.CREATE, ResourceType.TOPIC, topic)
        return may_create
    return for_principal


def heartbeat_error(req: Request[StreamsGroupHeartbeatRequest], code: int) -> StreamsGroupHeartbeatResponse:
    return error_response(code)


def topology_description_update_error(req: Request[StreamsGroupTopologyDescriptionUpdateRequest],
                                      code: int) -> StreamsGroupTopologyDescriptionUpdateResponse:
    # Kafka answers a refused request with its error's own message.
    return update_response(code, "Group authorization failed." if code == ErrorCode.GROUP_AUTHORIZATION_FAILED
                           else None)


def describe_failed(group_id: str, code: int) -> StreamsGroupDescribeResponse.DescribedGroup:
    return streams_describe.failed(group_id, code)


def describe_error(req: Request[StreamsGroupDescribeRequest], code: int) -> StreamsGroupDescribeResponse:
    return StreamsGroupDescribeResponse(groups=[describe_failed(g, code) for g in req.body.group_ids])


class StreamsGroupApis:
    def __init__(self, shards: GroupCoordinatorService, routing: GroupRouting, admin: TopicAdmin,
                 may_create: MayCreate | None) -> None:
        self.shards = shards
        self.routing = routing
        self.runtime_for = routing.runtime_for
        self.admin = admin
        self.may_create = may_create

    def streams_group_heartbeat(self, req: Request[StreamsGroupHeartbeatRequest]) -> None:
        body = req.body
        group_id = body.group_id
        if group_id is None:
            req.reply.set(heartbeat_error(req, ErrorCode.INVALID_GROUP_ID))
            return
        runtime = self.runtime_for(group_id)
        if not runtime.serving:
            req.reply.set(heartbeat_error(req, ErrorCode.NOT_COORDINATOR))
            return
        if not runtime.loaded:
            req.reply.set(heartbeat_error(req, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
            return
        to_create: list[InternalTopic] = []

        def op(shard: GroupCoordinatorShard, token: int, now: int) -> Result:
            # Kafka records the client's address as InetAddress.toString() does: "/127.0.0.1".
            ctx = RequestContext(token=token, api_version=req.version, client_id=req.client_id,
                                 client_host="/" + req.client_host)
            result = shard.streams_group_heartbeat(body, ctx, now)
            pending = shard.state.streams.to_create
            to_create.extend(pending)
            pending.clear()
            return result

        def deliver(response: Any) -> None:
            if to_create and response.error_code == ErrorCode.NONE:
                denied = self._create(req, to_create)
                if denied:
                    # Kafka appends this to the status that names the missing topics.
                    detail = f"Unauthorized to CREATE on topics {', '.join(denied)}."
                    statuses = response.status if response.status is not None else []
                    missing = [s for s in statuses if s.status_code == MISSING_INTERNAL_TOPICS]
                    if missing:
                        missing[0].status_detail = f"{missing[0].status_detail}; {detail}"
                    else:
                        statuses.append(StreamsGroupHeartbeatResponse.Status(
                            status_code=MISSING_INTERNAL_TOPICS, status_detail=detail))
                    response.status = statuses
            req.reply.set(response)

        runtime.execute(op, deliver, lambda code: heartbeat_error(req, code), group_id)

    def streams_group_topology_description_update(
            self, req: Request[StreamsGroupTopologyDescriptionUpdateRequest]) -> None:
        """KIP-1331: the member's topology description, kept by the group's shard (see
        ``broker/coordinators/group/core/streams_topology_description.py``)."""
        body = req.body
        runtime = self.runtime_for(body.group_id)
        if not runtime.serving:
            req.reply.set(update_response(ErrorCode.NOT_COORDINATOR))
            return
        if not runtime.loaded:
            req.reply.set(update_response(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
            return

        def op(shard: GroupCoordinatorShard, token: int, now: int) -> Result:
            ctx = RequestContext(token=token, api_version=req.version, client_id=req.client_id,
                                 client_host="/" + req.client_host)
            return shard.streams_group_topology_description_update(body, ctx, now)

        def deliver(response: StreamsGroupTopologyDescriptionUpdateResponse) -> None:
            req.reply.set(response)

        runtime.execute(op, deliver, update_response, body.group_id)

    def _create(self, req: Request[StreamsGroupHeartbeatRequest], topics: list[InternalTopic]) -> list[str]:
        """Creates the internal topics if the principal may create every one of them (Kafka checks
        the whole set: one it may not create holds back the others); else returns those it may not."""
        allowed = None if self.may_create is None else self.may_create(req.principal, req.client_host)
        wanted: dict[str, InternalTopic] = {}
        for topic in topics:
            if topic.name not in wanted and self.admin.catalog.partition_count(topic.name) is None:
                wanted[topic.name] = topic
        denied = sorted(name for name in wanted if allowed is not None and not allowed(name))
        if denied:
            return denied
        for topic in wanted.values():
            # Streams sets configs this broker does not keep (message.timestamp.type, ...): the
            # ones it knows are kept.
            configs = {k: v for k, v in topic.configs if k in KAFKA_TOPIC_CONFIGS}
            try:
                self.admin.create_topic(topic.name, max(topic.partitions, 1), configs)
            except TopicError as exc:
                logs.warn("streams_group.internal_topic_failed", topic=topic.name, error=str(exc))
                continue
            logs.event("streams_group.internal_topic_created", group=req.body.group_id, topic=topic.name,
                       partitions=topic.partitions)
        return []

    def streams_group_describe(self, req: Request[StreamsGroupDescribeRequest]) -> None:
        with_topology = req.version >= 1 and req.body.include_topology_description

        def answer(groups: list[StreamsGroupDescribeResponse.DescribedGroup]) -> None:
            if req.body.include_authorized_operations:
                for group in groups:
                    if group.error_code == 0 and group.authorized_operations == -2147483648:
                        group.authorized_operations = all_operations(ResourceType.GROUP)
            req.reply.set(StreamsGroupDescribeResponse(groups=groups))

        self.routing.describe_each(req.body.group_ids, lambda shard, g: shard.streams_group_describe(g, with_topology),
                                   describe_failed, answer)
