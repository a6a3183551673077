"""The checks Kafka's request handlers make before serving a request, with the authorizer on.

Each check runs after the request is decoded and before its handler. A request whose every part
is denied is answered here (GROUP_/TOPIC_/CLUSTER_AUTHORIZATION_FAILED) and its handler never
runs, so nothing it carries reaches the log. A request partly denied has the denied parts removed
before the handler sees it, and they are put back, with their authorization error, into the
handler's response (``Reply.amend``). Operations per API follow Kafka's KafkaApis and group
coordinator: Read on the group to join, sync, heartbeat, leave and commit; Describe to fetch
offsets, describe, list and find the coordinator; Delete to delete groups and offsets; Read,
Write, Describe, Create, Delete and Alter on topics; Cluster for admin APIs; Write on the
transactional id for the transaction APIs (and for Produce of transactional records), Describe on
it to find its coordinator, describe or list it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeAlias, TypeVar

from broker.cluster.peers import PeerSecret
from broker.network.router import Request
from broker.observability.metrics import METRICS
from broker.security.acl_model import CLUSTER_NAME, Operation, ResourceType
from broker.security.authorizer import Authorizer
from broker.topics.catalog import TopicCatalog, validate_topic_name
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.describe_producers import DescribeProducersRequest, DescribeProducersResponse
from protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from protocol.messages.describe_transactions import DescribeTransactionsRequest, DescribeTransactionsResponse
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.list_config_resources import ListConfigResourcesRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from protocol.messages.list_transactions import ListTransactionsRequest
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from protocol.messages.share_fetch import ShareFetchRequest
from protocol.messages.share_group_describe import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest, StreamsGroupDescribeResponse
from protocol.messages.streams_group_heartbeat import (
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
)
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from protocol.schema import Data

GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
# OffsetCommit and OffsetFetch v10 name topics by id.
TOPIC_ID_VERSION = 10
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
_TRANSACTIONAL = 0x10  # record batch v2 attribute bit
# DescribeConfigs resource types (Kafka's ConfigResource.Type) -> the ACL resource checked, its error.
_MESSAGES = {TOPIC_DENIED: "Topic authorization failed.", CLUSTER_DENIED: "Cluster authorization failed.",
             GROUP_DENIED: "Group authorization failed."}
_CONFIG_RESOURCES = {
    2: (ResourceType.TOPIC, TOPIC_DENIED),
    4: (ResourceType.CLUSTER, CLUSTER_DENIED),  # BROKER
    8: (ResourceType.CLUSTER, CLUSTER_DENIED),  # BROKER_LOGGER
    16: (ResourceType.CLUSTER, CLUSTER_DENIED),  # CLIENT_METRICS
    32: (ResourceType.GROUP, GROUP_DENIED),
}
_NOT_REQUESTED = -2147483648

# How an API answers a request refused with an error code (its entry's ``refuse``, broker/apis.py).
Body = TypeVar("Body")


class GroupRequest(Protocol):
    @property
    def group_id(self) -> str: ...


class TransactionalRequest(Protocol):
    @property
    def transactional_id(self) -> str: ...


Refuse: TypeAlias = Callable[[Request[Body], int], Data]
Group = TypeVar("Group", bound=GroupRequest)
Transactional = TypeVar("Transactional", bound=TransactionalRequest)


class RequestChecks:
    """The authorization rules: one per API, named by that API's entry in the table (broker/apis.py).
    A rule is given the request and how its API answers a refused request (``refuse``), and says
    whether it answered it."""

    def __init__(self, catalog: TopicCatalog, authorizer: Authorizer, peer_secret: PeerSecret) -> None:
        self.catalog = catalog
        self.authorizer = authorizer
        # Requests another node of the cluster sends (broker.cluster.peers) pass as a broker's would.
        self.peer_secret = peer_secret

    def open_to_all(self, req: Request[Body], refuse: Refuse[Body]) -> bool:
        """The rule of APIs that every client may call (ApiVersions, the SASL exchange)."""
        return False

    # ---- helpers --------------------------------------------------------------------------------

    def allowed(self, req: Request[Body], operation: int, resource_type: int, name: str) -> bool:
        ok = self.authorizer.authorize(req.principal, req.client_host, operation, resource_type, name)
        if not ok:
            METRICS.authorization_denials.labels(ApiKey(req.api_key).name,
                                                 ResourceType(resource_type).name).inc()
        return ok

    def operations(self, req: Request[Body], resource_type: int, name: str) -> int:
        return self.authorizer.authorized_operations(req.principal, req.client_host, resource_type, name)

    def _topic_name(self, name: str | None, topic_id: bytes | None) -> str:
        if name:
            return name
        found = self.catalog.topic_name(topic_id) if topic_id else None
        return found if found is not None else ""

    @staticmethod
    def _deny(req: Request[Body], response: Data) -> bool:
        req.reply.set(response)
        return True

    def group_read(self, req: Request[Group], refuse: Refuse[Group]) -> bool:
        """Read on the request's group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)."""
        if self.allowed(req, Operation.READ, ResourceType.GROUP, req.body.group_id):
            return False
        return self._deny(req, refuse(req, GROUP_DENIED))

    def cluster_describe(self, req: Request[Body], refuse: Refuse[Body]) -> bool:
        if self.allowed(req, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return False
        return self._deny(req, refuse(req, CLUSTER_DENIED))

    def cluster_alter(self, req: Request[Body], refuse: Refuse[Body]) -> bool:
        if self.allowed(req, Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
            return False
        return self._deny(req, refuse(req, CLUSTER_DENIED))

    # ---- client quotas ----------------------------------------------------------------------------

    def client_quotas_describe(self, req: Request[Body], refuse: Refuse[Body]) -> bool:
        """DescribeClientQuotas: DESCRIBE_CONFIGS on the cluster, as Kafka checks it."""
        if self.allowed(req, Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
            return False
        return self._deny(req, refuse(req, CLUSTER_DENIED))

    def client_quotas_alter(self, req: Request[Body], refuse: Refuse[Body]) -> bool:
        """AlterClientQuotas: ALTER_CONFIGS on the cluster, as Kafka checks it."""
        if self.allowed(req, Operation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
            return False
        return self._deny(req, refuse(req, CLUSTER_DENIED))

    def _split(self, req: Request[Body], items: list[Any], allowed: Callable[[Any], bool], field: str,
               put_back: Callable[[Any, list[Any]], None]) -> bool:
        """Keeps the allowed ``items`` in the request's ``field`` and has the denied ones put back
        into the response. True when nothing is left to serve (the caller answers)."""
        denied = [item for item in items if not allowed(item)]
        if not denied:
            return False
        setattr(req.body, field, [item for item in items if allowed(item)])
        def amend(response: Any) -> Any:
            put_back(response, denied)
            return response

        req.reply.amend = amend
        return not getattr(req.body, field)

    # ---- groups ---------------------------------------------------------------------------------

    def consumer_group_heartbeat(self, req: Request[ConsumerGroupHeartbeatRequest], refuse: Refuse[ConsumerGroupHeartbeatRequest]) -> bool:
        """Read on the group, then (as Kafka 4.0 does) Describe on every subscribed topic: a
        member may not learn the partitions of a topic it may not describe."""
        body = req.body
        if not self.allowed(req, Operation.READ, ResourceType.GROUP, body.group_id):
            return self._deny(req, ConsumerGroupHeartbeatResponse(
                error_code=GROUP_DENIED, error_message="Not authorized to access group"))
        hidden = sorted({t for t in body.subscribed_topic_names or []
                         if not self.allowed(req, Operation.DESCRIBE, ResourceType.TOPIC, t)})
        if not hidden:
            return False
        return self._deny(req, ConsumerGroupHeartbeatResponse(
            error_code=TOPIC_DENIED, error_message=f"The group has subscribed to topics that it is not authorized "
                                                   f"to describe: {', '.join(hidden)}"))

    def streams_group_heartbeat(self, req: Request[StreamsGroupHeartbeatRequest],
                                refuse: Refuse[StreamsGroupHeartbeatRequest]) -> bool:
        """Read on the group, then (Kafka's handleStreamsGroupHeartbeat) Describe on every topic a
        joining member's topology names: sources, repartition and changelog topics."""
        body = req.body
        if not self.allowed(req, Operation.READ, ResourceType.GROUP, body.group_id):
            return self._deny(req, _streams_heartbeat_denied(GROUP_DENIED, "Not authorized to access group"))
        if body.topology is None:
            return False
        named: set[str] = set()
        for sub in body.topology.subtopologies:
            named.update(sub.source_topics)
            named.update(sub.repartition_sink_topics)
            named.update(t.name for t in sub.repartition_source_topics)
            named.update(t.name for t in sub.state_changelog_topics)
        hidden = sorted(t for t in named if not self.allowed(req, Operation.DESCRIBE, ResourceType.TOPIC, t))
        if not hidden:
            return False
        return self._deny(req, _streams_heartbeat_denied(
            TOPIC_DENIED, f"The following topics are not authorized: {', '.join(hidden)}"))

    def streams_group_describe(self, req: Request[StreamsGroupDescribeRequest],
                               refuse: Refuse[StreamsGroupDescribeRequest]) -> bool:
        """Describe on each group."""
        G = StreamsGroupDescribeResponse.DescribedGroup
        return self._described(req, list(req.body.group_ids), "group_ids", lambda g: G(
            error_code=GROUP_DENIED, error_message="Not authorized to access group", group_id=g, group_state="",
            group_epoch=0, assignment_epoch=0, members=[]), StreamsGroupDescribeResponse(groups=[]))
    def share_group_heartbeat(self, req: Request[ShareGroupHeartbeatRequest], refuse: Refuse[ShareGroupHeartbeatRequest]) -> bool:
        """Read on the group, then Describe on every subscribed topic (as Kafka checks them)."""
        body = req.body
        if not self.allowed(req, Operation.READ, ResourceType.GROUP, body.group_id):
            return self._deny(req, ShareGroupHeartbeatResponse(
                error_code=GROUP_DENIED, error_message="Not authorized to access group"))
        hidden = sorted({t for t in body.subscribed_topic_names or []
                         if not self.allowed(req, Operation.DESCRIBE, ResourceType.TOPIC, t)})
        if not hidden:
            return False
        return self._deny(req, ShareGroupHeartbeatResponse(
            error_code=TOPIC_DENIED, error_message=f"The group has subscribed to topics that it is not authorized "
                                                   f"to describe: {', '.join(hidden)}"))

    def share_group_describe(self, req: Request[ShareGroupDescribeRequest], refuse: Refuse[ShareGroupDescribeRequest]) -> bool:
        """Describe on each group."""
        G = ShareGroupDescribeResponse.DescribedGroup
        return self._described(req, list(req.body.group_ids), "group_ids", lambda g: G(
            error_code=GROUP_DENIED, error_message="Not authorized to access group", group_id=g, group_state="",
            group_epoch=0, assignment_epoch=0, assignor_name="", members=[]), ShareGroupDescribeResponse(groups=[]))

    def _share_read(self, req: Any, group_id: str | None, topic_ids: list[bytes]) -> int:
        """Read on the group, then Read on every topic (Kafka refuses the group first)."""
        if not self.allowed(req, Operation.READ, ResourceType.GROUP, group_id or ""):
            return GROUP_DENIED
        for topic_id in topic_ids:
            name = self._topic_name(None, topic_id)
            if not self.allowed(req, Operation.READ, ResourceType.TOPIC, name):
                return TOPIC_DENIED
        return 0

    def share_fetch(self, req: Request[ShareFetchRequest], refuse: Refuse[ShareFetchRequest]) -> bool:
        code = self._share_read(req, req.body.group_id, [t.topic_id for t in req.body.topics])
        return bool(code) and self._deny(req, refuse(req, code))

    def share_acknowledge(self, req: Request[ShareAcknowledgeRequest], refuse: Refuse[ShareAcknowledgeRequest]) -> bool:
        code = self._share_read(req, req.body.group_id, [t.topic_id for t in req.body.topics])
        return bool(code) and self._deny(req, refuse(req, code))

    def describe_share_group_offsets(self, req: Request[DescribeShareGroupOffsetsRequest],
                                     refuse: Refuse[DescribeShareGroupOffsetsRequest]) -> bool:
        """Describe on each group (a denied one is answered GROUP_AUTHORIZATION_FAILED), Describe on
        each named topic."""
        if any(not self.allowed(req, Operation.DESCRIBE, ResourceType.GROUP, g.group_id) for g in req.body.groups):
            return self._deny(req, refuse(req, GROUP_DENIED))
        names = [t.topic_name for g in req.body.groups for t in g.topics or []]
        if any(not self.allowed(req, Operation.DESCRIBE, ResourceType.TOPIC, n) for n in names):
            return self._deny(req, refuse(req, TOPIC_DENIED))
        return False

    def alter_share_group_offsets(self, req: Request[AlterShareGroupOffsetsRequest],
                                  refuse: Refuse[AlterShareGroupOffsetsRequest]) -> bool:
        """Read on the group and on each topic, as Kafka checks them."""
        if not self.allowed(req, Operation.READ, ResourceType.GROUP, req.body.group_id):
            return self._deny(req, refuse(req, GROUP_DENIED))
        if any(not self.allowed(req, Operation.READ, ResourceType.TOPIC, t.topic_name) for t in req.body.topics):
            return self._deny(req, refuse(req, TOPIC_DENIED))
        return False

    def delete_share_group_offsets(self, req: Request[DeleteShareGroupOffsetsRequest],
                                   refuse: Refuse[DeleteShareGroupOffsetsRequest]) -> bool:
        """Delete on the group, Read on each topic, as Kafka checks them."""
        if not self.allowed(req, Operation.DELETE, ResourceType.GROUP, req.body.group_id):
            return self._deny(req, refuse(req, GROUP_DENIED))
        if any(not self.allowed(req, Operation.READ, ResourceType.TOPIC, t.topic_name) for t in req.body.topics):
            return self._deny(req, refuse(req, TOPIC_DENIED))
        return False

    def offset_commit(self, req: Request[OffsetCommitRequest], refuse: Refuse[OffsetCommitRequest]) -> bool:
        body = req.body
        P = OffsetCommitResponse.Topic.Partition

        def answer(t: Any, code: int) -> Any:
            return OffsetCommitResponse.Topic(name=t.name, topic_id=t.topic_id, partitions=[
                P(partition_index=p.partition_index, error_code=code) for p in t.partitions])

        if not self.allowed(req, Operation.READ, ResourceType.GROUP, body.group_id):
            return self._deny(req, OffsetCommitResponse(topics=[answer(t, GROUP_DENIED) for t in body.topics]))

        def readable(t: Any) -> bool:
            name = self._topic_name(t.name, t.topic_id)
            if not name and req.version >= TOPIC_ID_VERSION:
                return True  # an id no topic has: UNKNOWN_TOPIC_ID, which Kafka answers first
            return self.allowed(req, Operation.READ, ResourceType.TOPIC, name)

        if self._split(req, body.topics, readable, "topics",
                       lambda resp, denied: resp.topics.extend(answer(t, TOPIC_DENIED) for t in denied)):
            req.reply.set(OffsetCommitResponse(topics=[]))
            return True
        return False

    def offset_fetch(self, req: Request[OffsetFetchRequest], refuse: Refuse[OffsetFetchRequest]) -> bool:
        """Describe on the group; offsets only of topics the principal may describe (asked-for
        topics it may not get TOPIC_AUTHORIZATION_FAILED, "all topics" leaves them out)."""
        body = req.body
        if req.version < 8:
            if not self.allowed(req, Operation.DESCRIBE, ResourceType.GROUP, body.group_id):
                P = OffsetFetchResponse.Topic.Partition
                topics = [OffsetFetchResponse.Topic(name=t.name, partitions=[
                    P(partition_index=i, committed_offset=-1, metadata=None, error_code=GROUP_DENIED)
                    for i in t.partition_indexes]) for t in body.topics or []]
                return self._deny(req, OffsetFetchResponse(error_code=GROUP_DENIED, topics=topics))
            hidden = self._hide_topics(req, body, OffsetFetchResponse.Topic)

            def amend_v7(response: Any) -> Any:
                if not response.error_code:
                    hidden(response)
                return response

            req.reply.amend = amend_v7
            return False
        Group = OffsetFetchResponse.Group
        if self._split(req, body.groups,
                       lambda g: self.allowed(req, Operation.DESCRIBE, ResourceType.GROUP, g.group_id), "groups",
                       lambda resp, denied: resp.groups.extend(
                           Group(group_id=g.group_id, topics=[], error_code=GROUP_DENIED) for g in denied)):
            req.reply.set(OffsetFetchResponse(groups=[]))
            return True
        per_group = {g.group_id: self._hide_topics(req, g, Group.Topics) for g in body.groups}
        groups_denied = req.reply.amend

        def amend(response: Any) -> Any:
            for group in response.groups:
                hide = per_group.get(group.group_id)
                if hide is not None and not group.error_code:
                    hide(group)
            return groups_denied(response) if groups_denied is not None else response

        req.reply.amend = amend
        return False

    def _hide_topics(self, req: Request[Body], asked: Any, topic_cls: Any) -> Callable[[Any], None]:
        """Takes the topics the principal may not describe out of ``asked.topics``; returns what
        fixes the answer: those topics back with TOPIC_AUTHORIZATION_FAILED, or, when all topics
        were asked for, the answer without them."""
        principal, host = req.principal, req.client_host
        if asked.topics is None:
            def drop(answer: Any) -> None:
                answer.topics = [t for t in answer.topics if self.authorizer.authorize(
                    principal, host, Operation.DESCRIBE, ResourceType.TOPIC, t.name)]
            return drop
        by_id = req.version >= TOPIC_ID_VERSION

        def denied_topic(t: Any) -> bool:
            name = self._topic_name(t.name, t.topic_id if by_id else None)
            if not name and by_id:
                return False  # an id no topic has: UNKNOWN_TOPIC_ID, which Kafka answers first
            return not self.allowed(req, Operation.DESCRIBE, ResourceType.TOPIC, name)

        denied = [t for t in asked.topics if denied_topic(t)]
        asked.topics = [t for t in asked.topics if t not in denied]
        partition_cls = getattr(topic_cls, "Partition", None) or topic_cls.Partitions
        # Kafka leaves a refused partition's metadata at its default, "" (answered so from v10;
        # older versions keep kcoord's null).
        metadata = "" if by_id else None

        def put_back(answer: Any) -> None:
            for t in denied:
                ids = {"topic_id": t.topic_id} if hasattr(t, "topic_id") else {}
                answer.topics.append(topic_cls(name=t.name, **ids, partitions=[partition_cls(
                    partition_index=i, committed_offset=-1, metadata=metadata, error_code=TOPIC_DENIED)
                    for i in t.partition_indexes]))
        return put_back

    def offset_delete(self, req: Request[OffsetDeleteRequest], refuse: Refuse[OffsetDeleteRequest]) -> bool:
        body = req.body
        if not self.allowed(req, Operation.DELETE, ResourceType.GROUP, body.group_id):
            return self._deny(req, OffsetDeleteResponse(error_code=GROUP_DENIED, topics=[]))
        T = OffsetDeleteResponse.Topic
        if self._split(req, body.topics, lambda t: self.allowed(req, Operation.READ, ResourceType.TOPIC, t.name),
                       "topics", lambda resp, denied: resp.topics.extend(T(name=t.name, partitions=[
                           T.Partition(partition_index=p.partition_index, error_code=TOPIC_DENIED)
                           for p in t.partitions]) for t in denied)):
            req.reply.set(OffsetDeleteResponse(topics=[]))
            return True
        return False

    def _described(self, req: Request[Body], ids: list[str], field: str, make: Callable[[str], Any],
                   empty: Any) -> bool:
        """DescribeGroups and ConsumerGroupDescribe: Describe per group, and the authorized
        operations of each described group when asked."""
        include_ops = bool(getattr(req.body, "include_authorized_operations", False))
        denied = [g for g in ids if not self.allowed(req, Operation.DESCRIBE, ResourceType.GROUP, g)]

        def amend(response: Any) -> Any:
            if include_ops:
                for group in response.groups:
                    group.authorized_operations = self.operations(req, ResourceType.GROUP, group.group_id)
            response.groups.extend(make(g) for g in denied)
            return response

        if not denied and not include_ops:
            return False
        setattr(req.body, field, [g for g in ids if g not in denied])
        req.reply.amend = amend
        if not getattr(req.body, field):
            req.reply.set(empty)
            return True
        return False

    def describe_groups(self, req: Request[DescribeGroupsRequest], refuse: Refuse[DescribeGroupsRequest]) -> bool:
        G = DescribeGroupsResponse.DescribedGroup
        return self._described(req, list(req.body.groups), "groups", lambda g: G(
            error_code=GROUP_DENIED, group_id=g, group_state="", protocol_type="", protocol_data="", members=[]),
            DescribeGroupsResponse(groups=[]))

    def consumer_group_describe(self, req: Request[ConsumerGroupDescribeRequest], refuse: Refuse[ConsumerGroupDescribeRequest]) -> bool:
        """Describe on each group; then (Kafka 4.0, KAFKA-18813) a described group whose members
        subscribe to, own or are to own a topic the principal may not describe is answered
        TOPIC_AUTHORIZATION_FAILED without its members, which would show that topic."""
        G = ConsumerGroupDescribeResponse.DescribedGroup
        if self._described(req, list(req.body.group_ids), "group_ids", lambda g: G(
                error_code=GROUP_DENIED, error_message="Not authorized to access group", group_id=g),
                ConsumerGroupDescribeResponse(groups=[])):
            return True
        groups_checked = req.reply.amend
        describable: dict[str, bool] = {}

        def may_describe(topic: str) -> bool:
            ok = describable.get(topic)
            if ok is None:
                ok = describable[topic] = self.allowed(req, Operation.DESCRIBE, ResourceType.TOPIC, topic)
            return ok

        def amend(response: Any) -> Any:
            for group in response.groups:
                if not group.error_code and not all(may_describe(t) for t in _described_topics(group)):
                    group.error_code = TOPIC_DENIED
                    group.error_message = "The group has described topic(s) that the client is not authorized to describe."
                    group.members = []
            return groups_checked(response) if groups_checked is not None else response

        req.reply.amend = amend
        return False

    def list_groups(self, req: Request[ListGroupsRequest], refuse: Refuse[ListGroupsRequest]) -> bool:
        if self.allowed(req, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return False

        def amend(response: Any) -> Any:
            response.groups = [g for g in response.groups if self.authorizer.authorize(
                req.principal, req.client_host, Operation.DESCRIBE, ResourceType.GROUP, g.group_id)]
            return response

        req.reply.amend = amend
        return False

    def delete_groups(self, req: Request[DeleteGroupsRequest], refuse: Refuse[DeleteGroupsRequest]) -> bool:
        R = DeleteGroupsResponse.DeletableGroupResult
        if self._split(req, list(req.body.groups_names),
                       lambda g: self.allowed(req, Operation.DELETE, ResourceType.GROUP, g), "groups_names",
                       lambda resp, denied: resp.results.extend(R(group_id=g, error_code=GROUP_DENIED)
                                                                for g in denied)):
            req.reply.set(DeleteGroupsResponse(results=[]))
            return True
        return False

    def find_coordinator(self, req: Request[FindCoordinatorRequest], refuse: Refuse[FindCoordinatorRequest]) -> bool:
        body = req.body
        if body.key_type == 0:
            resource, code, message = ResourceType.GROUP, GROUP_DENIED, "Not authorized to access group"
        elif body.key_type == 1:
            resource, code = ResourceType.TRANSACTIONAL_ID, TXN_DENIED
            message = "Transactional Id authorization failed."
        elif body.key_type == 2:
            # A share-state key: brokers look it up, so Kafka asks ClusterAction on the cluster.
            if self.allowed(req, Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
                return False
            C = FindCoordinatorResponse.Coordinator
            keys = list(body.coordinator_keys) if req.version >= 4 else [body.key]
            return self._deny(req, FindCoordinatorResponse(
                error_code=CLUSTER_DENIED, error_message=_MESSAGES[CLUSTER_DENIED], node_id=-1, host="", port=-1,
                coordinators=[C(key=k, node_id=-1, host="", port=-1, error_code=CLUSTER_DENIED) for k in keys]
                if req.version >= 4 else []))
        else:
            return False
        if req.version < 4:
            if self.allowed(req, Operation.DESCRIBE, resource, body.key):
                return False
            return self._deny(req, FindCoordinatorResponse(error_code=code, node_id=-1, host="", port=-1,
                                                           error_message=message))
        C = FindCoordinatorResponse.Coordinator
        if self._split(req, list(body.coordinator_keys),
                       lambda k: self.allowed(req, Operation.DESCRIBE, resource, k), "coordinator_keys",
                       lambda resp, denied: resp.coordinators.extend(C(key=k, node_id=-1, host="", port=-1,
                                                                       error_code=code) for k in denied)):
            req.reply.set(FindCoordinatorResponse(coordinators=[]))
            return True
        return False

    # ---- topics -------------------------------------------------------------------------------

    def metadata(self, req: Request[MetadataRequest], refuse: Refuse[MetadataRequest]) -> bool:
        body = req.body
        include_topic_ops = req.version >= 8 and body.include_topic_authorized_operations
        include_cluster_ops = 8 <= req.version <= 10 and body.include_cluster_authorized_operations
        principal, host = req.principal, req.client_host
        T = MetadataResponse.Topic
        denied: list[Any] = []
        unknown: list[str] = []
        if body.topics is not None and (body.topics or req.version > 0):
            kept = []
            for t in body.topics:
                name = self._topic_name(t.name, t.topic_id)
                if not self.allowed(req, Operation.DESCRIBE, ResourceType.TOPIC, name):
                    denied.append(t)
                elif name and self.catalog.get(name) is None and not (
                        self.authorizer.authorize(principal, host, Operation.CREATE, ResourceType.CLUSTER,
                                                  CLUSTER_NAME)
                        or self.authorizer.authorize(principal, host, Operation.CREATE, ResourceType.TOPIC, name)):
                    unknown.append(name)  # not created for a principal without Create
                else:
                    kept.append(t)
            body.topics = kept

        def amend(response: Any) -> Any:
            if body.topics is None or (req.version == 0 and not body.topics and not denied and not unknown):
                response.topics = [t for t in response.topics if t.name is None or self.authorizer.authorize(
                    principal, host, Operation.DESCRIBE, ResourceType.TOPIC, t.name)]
            if include_topic_ops:
                for t in response.topics:
                    if not t.error_code and t.name:
                        t.topic_authorized_operations = self.operations(req, ResourceType.TOPIC, t.name)
            if include_cluster_ops:
                response.cluster_authorized_operations = self.operations(req, ResourceType.CLUSTER, CLUSTER_NAME)
            response.topics.extend(T(error_code=TOPIC_DENIED, name=t.name, topic_id=t.topic_id, partitions=[])
                                   for t in denied)
            response.topics.extend(T(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=n, partitions=[])
                                   for n in unknown)
            return response

        req.reply.amend = amend
        return False

    def produce(self, req: Request[ProduceRequest], refuse: Refuse[ProduceRequest]) -> bool:
        R = ProduceResponse.TopicProduceResponse
        topics = req.body.topic_data
        if self.peer_secret.is_peer(req.client_id):
            return False  # another node writing a share group's dead letters, as Kafka's brokers do
        if _has_transactional_records(topics) and not (
                req.body.transactional_id is not None
                and self.allowed(req, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.body.transactional_id)):
            if req.body.acks == 0:
                req.reply.set_nothing()
                return True
            return self._deny(req, ProduceResponse(responses=[R(name=t.name, topic_id=t.topic_id, partition_responses=[
                R.PartitionProduceResponse(index=p.index, error_code=TXN_DENIED, base_offset=-1)
                for p in t.partition_data]) for t in topics]))

        def put_back(resp: Any, denied: list[Any]) -> None:
            for t in denied:
                resp.responses.append(R(name=t.name, topic_id=t.topic_id, partition_responses=[
                    R.PartitionProduceResponse(index=p.index, error_code=TOPIC_DENIED, base_offset=-1)
                    for p in t.partition_data]))

        def writable(t: Any) -> bool:
            return self.allowed(req, Operation.WRITE, ResourceType.TOPIC, self._topic_name(t.name, t.topic_id))

        if self._split(req, topics, writable, "topic_data", put_back):
            if req.body.acks == 0:
                req.reply.set_nothing()
                return True
            response = ProduceResponse(responses=[])
            req.reply.set(response)
            return True
        return False

    def fetch(self, req: Request[FetchRequest], refuse: Refuse[FetchRequest]) -> bool:
        def put_back(resp: Any, denied: list[Any]) -> None:
            topic_cls = FetchResponse.FetchableTopicResponse
            part_cls = topic_cls.PartitionData
            for t in denied:
                resp.responses.append(topic_cls(topic=t.topic, topic_id=t.topic_id, partitions=[
                    part_cls(partition_index=p.partition, error_code=TOPIC_DENIED, high_watermark=-1,
                             records=None) for p in t.partitions]))

        def readable(t: Any) -> bool:
            return self.allowed(req, Operation.READ, ResourceType.TOPIC, self._topic_name(t.topic, t.topic_id))

        if self._split(req, req.body.topics, readable, "topics", put_back):
            req.reply.set(FetchResponse(responses=[]))
            return True
        return False

    def list_offsets(self, req: Request[ListOffsetsRequest], refuse: Refuse[ListOffsetsRequest]) -> bool:
        T = ListOffsetsResponse.Topic
        if self.peer_secret.is_peer(req.client_id):
            return False  # another node asking the ends of partitions for a share group's lag
        if self._split(req, req.body.topics, lambda t: self.allowed(req, Operation.DESCRIBE, ResourceType.TOPIC,
                                                                    t.name), "topics",
                       lambda resp, denied: resp.topics.extend(T(name=t.name, partitions=[
                           T.Partition(partition_index=p.partition_index, error_code=TOPIC_DENIED)
                           for p in t.partitions]) for t in denied)):
            req.reply.set(ListOffsetsResponse(topics=[]))
            return True
        return False

    # ---- records and log directories ------------------------------------------------------------

    def delete_records(self, req: Request[DeleteRecordsRequest], refuse: Refuse[DeleteRecordsRequest]) -> bool:
        """Delete on each topic (KafkaApis.handleDeleteRecordsRequest)."""
        T = DeleteRecordsResponse.TopicResult
        if self._split(req, req.body.topics, lambda t: self.allowed(req, Operation.DELETE, ResourceType.TOPIC,
                                                                    t.name), "topics",
                       lambda resp, denied: resp.topics.extend(T(name=t.name, partitions=[
                           T.PartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                             error_code=TOPIC_DENIED) for p in t.partitions]) for t in denied)):
            req.reply.set(DeleteRecordsResponse(throttle_time_ms=0, topics=[]))
            return True
        return False

    def offset_for_leader_epoch(self, req: Request[OffsetForLeaderEpochRequest],
                                refuse: Refuse[OffsetForLeaderEpochRequest]) -> bool:
        """ClusterAction on the cluster (a replica), else Describe on each topic (a consumer, KIP-320)."""
        if self.authorizer.authorize(req.principal, req.client_host, Operation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                     CLUSTER_NAME):
            return False
        T = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
        if self._split(req, req.body.topics, lambda t: self.allowed(req, Operation.DESCRIBE, ResourceType.TOPIC,
                                                                    t.topic), "topics",
                       lambda resp, denied: resp.topics.extend(T(topic=t.topic, partitions=[
                           T.EpochEndOffset(partition=p.partition, error_code=TOPIC_DENIED, leader_epoch=-1,
                                            end_offset=-1) for p in t.partitions]) for t in denied)):
            req.reply.set(OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[]))
            return True
        return False

    def describe_producers(self, req: Request[DescribeProducersRequest],
                           refuse: Refuse[DescribeProducersRequest]) -> bool:
        """Read on each topic; an illegal topic name is the handler's to answer (Kafka checks it first)."""
        T = DescribeProducersResponse.TopicResponse

        def readable(t: Any) -> bool:
            return validate_topic_name(t.name) is not None or self.allowed(req, Operation.READ, ResourceType.TOPIC,
                                                                           t.name)

        if self._split(req, req.body.topics, readable, "topics",
                       lambda resp, denied: resp.topics.extend(T(name=t.name, partitions=[
                           T.PartitionResponse(partition_index=i, error_code=TOPIC_DENIED,
                                               error_message=_MESSAGES[TOPIC_DENIED], active_producers=[])
                           for i in t.partition_indexes]) for t in denied)):
            req.reply.set(DescribeProducersResponse(throttle_time_ms=0, topics=[]))
            return True
        return False

    def create_topics(self, req: Request[CreateTopicsRequest], refuse: Refuse[CreateTopicsRequest]) -> bool:
        if self.allowed(req, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME):
            return False
        R = CreateTopicsResponse.CreatableTopicResult
        if self._split(req, req.body.topics, lambda t: self.allowed(req, Operation.CREATE, ResourceType.TOPIC,
                                                                    t.name), "topics",
                       lambda resp, denied: resp.topics.extend(R(name=t.name, error_code=TOPIC_DENIED,
                                                                 error_message="Authorization failed.")
                                                               for t in denied)):
            req.reply.set(CreateTopicsResponse(topics=[]))
            return True
        return False

    def delete_topics(self, req: Request[DeleteTopicsRequest], refuse: Refuse[DeleteTopicsRequest]) -> bool:
        R = DeleteTopicsResponse.DeletableTopicResult
        if req.version < 6:
            if self._split(req, list(req.body.topic_names),
                           lambda n: self.allowed(req, Operation.DELETE, ResourceType.TOPIC, n), "topic_names",
                           lambda resp, denied: resp.responses.extend(R(name=n, error_code=TOPIC_DENIED)
                                                                      for n in denied)):
                req.reply.set(DeleteTopicsResponse(responses=[]))
                return True
            return False
        if self._split(req, req.body.topics, lambda t: self.allowed(
                req, Operation.DELETE, ResourceType.TOPIC, self._topic_name(t.name, t.topic_id)), "topics",
                lambda resp, denied: resp.responses.extend(R(name=t.name, topic_id=t.topic_id,
                                                             error_code=TOPIC_DENIED) for t in denied)):
            req.reply.set(DeleteTopicsResponse(responses=[]))
            return True
        return False

    def create_partitions(self, req: Request[CreatePartitionsRequest], refuse: Refuse[CreatePartitionsRequest]) -> bool:
        R = CreatePartitionsResponse.TopicResult
        if self._split(req, req.body.topics, lambda t: self.allowed(req, Operation.ALTER, ResourceType.TOPIC,
                                                                    t.name), "topics",
                       lambda resp, denied: resp.results.extend(R(name=t.name, error_code=TOPIC_DENIED)
                                                                for t in denied)):
            req.reply.set(CreatePartitionsResponse(results=[]))
            return True
        return False

    def init_producer_id(self, req: Request[InitProducerIdRequest], refuse: Refuse[InitProducerIdRequest]) -> bool:
        txn_id = req.body.transactional_id
        if txn_id is not None:
            # A two-phase commit participant (KIP-939) needs TwoPhaseCommit on the id besides Write.
            if self.allowed(req, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id) and (
                    not req.body.enable2_pc
                    or self.allowed(req, Operation.TWO_PHASE_COMMIT, ResourceType.TRANSACTIONAL_ID, txn_id)):
                return False
            return self._deny(req, InitProducerIdResponse(error_code=TXN_DENIED, producer_id=-1, producer_epoch=-1))
        if self.authorizer.authorize(req.principal, req.client_host, Operation.IDEMPOTENT_WRITE,
                                     ResourceType.CLUSTER, CLUSTER_NAME) or \
                self.authorizer.authorize_any(req.principal, req.client_host, Operation.WRITE,
                                              ResourceType.TOPIC):
            return False
        METRICS.authorization_denials.labels(ApiKey(req.api_key).name, ResourceType.CLUSTER.name).inc()
        return self._deny(req, InitProducerIdResponse(error_code=CLUSTER_DENIED, producer_id=-1, producer_epoch=-1))

    # ---- configs and the cluster ----------------------------------------------------------------

    def describe_configs(self, req: Request[DescribeConfigsRequest], refuse: Refuse[DescribeConfigsRequest]) -> bool:
        R = DescribeConfigsResponse.Result

        def allowed(r: Any) -> bool:
            kind = _CONFIG_RESOURCES.get(r.resource_type)
            if kind is None:
                return True  # the handler answers what it does not know
            name = CLUSTER_NAME if kind[0] == ResourceType.CLUSTER else r.resource_name
            return self.allowed(req, Operation.DESCRIBE_CONFIGS, kind[0], name)

        def put_back(resp: Any, denied: list[Any]) -> None:
            for r in denied:
                code = _CONFIG_RESOURCES[r.resource_type][1]
                resp.results.append(R(error_code=code, error_message=_MESSAGES[code], resource_type=r.resource_type,
                                      resource_name=r.resource_name, configs=[]))

        if self._split(req, req.body.resources, allowed, "resources", put_back):
            req.reply.set(DescribeConfigsResponse(results=[]))
            return True
        return False

    def describe_cluster(self, req: Request[DescribeClusterRequest], refuse: Refuse[DescribeClusterRequest]) -> bool:
        """Kafka answers everyone; the cluster's authorized operations (when asked for) are 0 for
        a principal that may not describe it."""
        if not req.body.include_cluster_authorized_operations:
            return False

        def amend(response: Any) -> Any:
            if not response.error_code:
                response.cluster_authorized_operations = (
                    self.operations(req, ResourceType.CLUSTER, CLUSTER_NAME)
                    if self.allowed(req, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME) else 0)
            return response

        req.reply.amend = amend
        return False

    # ---- transactions ---------------------------------------------------------------------------

    def transactional_write(self, req: Request[Transactional], refuse: Refuse[Transactional]) -> bool:
        """Write on the request's transactional id (EndTxn)."""
        if self.allowed(req, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.body.transactional_id):
            return False
        return self._deny(req, refuse(req, TXN_DENIED))

    def cluster_peer(self, req: Request[Body], refuse: Refuse[Body]) -> bool:
        """Requests only the cluster's other nodes send (WriteTxnMarkers): a node proves itself with
        the cluster's secret (broker.cluster.peers), or a principal with ClusterAction passes."""
        if self.peer_secret.is_peer(req.client_id) or \
                self.allowed(req, Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            return False
        return self._deny(req, refuse(req, CLUSTER_DENIED))

    def add_partitions_to_txn(self, req: Request[AddPartitionsToTxnRequest], refuse: Refuse[AddPartitionsToTxnRequest]) -> bool:
        body = req.body
        if req.version >= 4:  # from brokers only (KIP-890)
            if self.peer_secret.is_peer(req.client_id) or \
                    self.allowed(req, Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
                return False
            return self._deny(req, AddPartitionsToTxnResponse(error_code=CLUSTER_DENIED, results_by_transaction=[]))
        T = AddPartitionsToTxnResponse.TopicResult

        def answer(code_of: Callable[[str], int]) -> bool:
            return self._deny(req, AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[T(
                name=t.name, results_by_partition=[T.PartitionResult(partition_index=p,
                                                                     partition_error_code=code_of(t.name))
                                                   for p in t.partitions]) for t in body.v3_and_below_topics]))

        if not self.allowed(req, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body.v3_and_below_transactional_id):
            return answer(lambda _: TXN_DENIED)
        denied = {t.name for t in body.v3_and_below_topics
                  if not self.allowed(req, Operation.WRITE, ResourceType.TOPIC, t.name)}
        if denied:  # Kafka fails the whole request: the others were not attempted
            return answer(lambda name: TOPIC_DENIED if name in denied else ErrorCode.OPERATION_NOT_ATTEMPTED)
        return False

    def add_offsets_to_txn(self, req: Request[AddOffsetsToTxnRequest], refuse: Refuse[AddOffsetsToTxnRequest]) -> bool:
        if not self.allowed(req, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.body.transactional_id):
            return self._deny(req, AddOffsetsToTxnResponse(error_code=TXN_DENIED))
        if not self.allowed(req, Operation.READ, ResourceType.GROUP, req.body.group_id):
            return self._deny(req, AddOffsetsToTxnResponse(error_code=GROUP_DENIED))
        return False

    def txn_offset_commit(self, req: Request[TxnOffsetCommitRequest], refuse: Refuse[TxnOffsetCommitRequest]) -> bool:
        body = req.body
        T = TxnOffsetCommitResponse.Topic

        def answer(t: Any, code: int) -> Any:
            return T(name=t.name, topic_id=t.topic_id, partitions=[
                T.Partition(partition_index=p.partition_index, error_code=code) for p in t.partitions])

        def readable(t: Any) -> bool:
            name = self._topic_name(t.name, t.topic_id if req.version >= 6 else None)
            if not name and req.version >= 6:
                return True  # an id no topic has: UNKNOWN_TOPIC_ID, answered by the coordinator
            return self.allowed(req, Operation.READ, ResourceType.TOPIC, name)

        if not self.allowed(req, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
            return self._deny(req, TxnOffsetCommitResponse(topics=[answer(t, TXN_DENIED) for t in body.topics]))
        if not self.allowed(req, Operation.READ, ResourceType.GROUP, body.group_id):
            return self._deny(req, TxnOffsetCommitResponse(topics=[answer(t, GROUP_DENIED) for t in body.topics]))
        if self._split(req, body.topics, readable,
                       "topics", lambda resp, denied: resp.topics.extend(answer(t, TOPIC_DENIED) for t in denied)):
            req.reply.set(TxnOffsetCommitResponse(topics=[]))
            return True
        return False

    def _describable_topics(self, req: Request[Body], state: Any) -> None:
        state.topics = [t for t in state.topics if self.authorizer.authorize(
            req.principal, req.client_host, Operation.DESCRIBE, ResourceType.TOPIC, t.topic)]

    def describe_transactions(self, req: Request[DescribeTransactionsRequest], refuse: Refuse[DescribeTransactionsRequest]) -> bool:
        ids = list(req.body.transactional_ids)
        denied = [i for i in ids if not self.allowed(req, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, i)]
        State = DescribeTransactionsResponse.TransactionState

        def amend(response: Any) -> Any:
            for state in response.transaction_states:
                self._describable_topics(req, state)
            response.transaction_states.extend(State(
                error_code=TXN_DENIED, transactional_id=i, transaction_state="", transaction_timeout_ms=0,
                transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[]) for i in denied)
            return response

        req.body.transactional_ids = [i for i in ids if i not in denied]
        req.reply.amend = amend
        if not req.body.transactional_ids:
            req.reply.set(DescribeTransactionsResponse(transaction_states=[]))
            return True
        return False

    def list_transactions(self, req: Request[ListTransactionsRequest], refuse: Refuse[ListTransactionsRequest]) -> bool:
        def amend(response: Any) -> Any:
            response.transaction_states = [s for s in response.transaction_states if self.authorizer.authorize(
                req.principal, req.client_host, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                s.transactional_id)]
            return response

        req.reply.amend = amend
        return False


    # ---- topology and features --------------------------------------------------------------------

    def describe_topic_partitions(self, req: Request[Body], refuse: Refuse[Body]) -> bool:
        """Describe on each topic, checked by the handler while it pages (Kafka's
        DescribeTopicPartitionsRequestHandler): the cursor and the partition limit apply to the
        topics the principal may describe, so they cannot be filtered out before or after."""
        return False

    # ---- changing configs, listing config resources --------------------------------------------

    def _alter_configs(self, req: Request[Body], refuse: Refuse[Body], resources: list[Any],
                       make: Callable[..., Any]) -> bool:
        """ALTER_CONFIGS on each resource's TOPIC, CLUSTER (a broker) or GROUP; a denied resource
        is answered with its error, the others are served."""
        def allowed(r: Any) -> bool:
            kind = _CONFIG_RESOURCES.get(r.resource_type)
            if kind is None:
                return True  # the handler answers what it does not know
            name = CLUSTER_NAME if kind[0] == ResourceType.CLUSTER else r.resource_name
            return self.allowed(req, Operation.ALTER_CONFIGS, kind[0], name)

        def put_back(resp: Any, denied: list[Any]) -> None:
            for r in denied:
                code = _CONFIG_RESOURCES[r.resource_type][1]
                resp.responses.append(make(error_code=code, error_message=_MESSAGES[code],
                                           resource_type=r.resource_type, resource_name=r.resource_name))

        if self._split(req, resources, allowed, "resources", put_back):
            req.reply.set(refuse(req, 0))
            return True
        return False

    def alter_configs(self, req: Request[AlterConfigsRequest], refuse: Refuse[AlterConfigsRequest]) -> bool:
        return self._alter_configs(req, refuse, req.body.resources, AlterConfigsResponse.ResourceResponse)

    def incremental_alter_configs(self, req: Request[IncrementalAlterConfigsRequest],
                                  refuse: Refuse[IncrementalAlterConfigsRequest]) -> bool:
        return self._alter_configs(req, refuse, req.body.resources,
                                   IncrementalAlterConfigsResponse.AlterConfigsResourceResponse)

    def list_config_resources(self, req: Request[ListConfigResourcesRequest],
                              refuse: Refuse[ListConfigResourcesRequest]) -> bool:
        """DESCRIBE_CONFIGS on the cluster, as Kafka checks it."""
        if self.allowed(req, Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
            return False
        return self._deny(req, refuse(req, CLUSTER_DENIED))

def _described_topics(group: Any) -> list[str]:
    """The topics a described consumer group shows: its members' subscribed topic names and the
    topics of their current and target assignments, in order of appearance."""
    names: dict[str, None] = {}
    for member in group.members:
        names.update(dict.fromkeys(member.subscribed_topic_names or ()))
        for assignment in (member.assignment, member.target_assignment):
            if assignment is not None:
                names.update(dict.fromkeys(tp.topic_name for tp in assignment.topic_partitions))
    return list(names)


def _has_transactional_records(topics: list[Any]) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords: the first batch of some partition is
    transactional (record batch v2: magic at byte 16, attributes at bytes 21-22)."""
    for t in topics:
        for p in t.partition_data:
            records = p.records
            if records is not None and len(records) >= 23 and records[16] >= 2 and records[22] & _TRANSACTIONAL:
                return True
    return False



def _streams_heartbeat_denied(code: int, message: str) -> StreamsGroupHeartbeatResponse:
    return StreamsGroupHeartbeatResponse(error_code=code, error_message=message, member_id="", member_epoch=0,
                                         heartbeat_interval_ms=0, acceptable_recovery_lag_legacy=0,
                                         task_offset_interval_ms=0, status=[], endpoint_information_epoch=0)
