"""ApiVersions, Metadata, DescribeCluster and FindCoordinator: what a client asks before it does
anything else."""

from __future__ import annotations

import re
from collections.abc import Callable

from broker import features
from broker.cluster.view import ClusterView
from broker.coordinators.group.core.base.partitioning import partition_for
from broker.coordinators.transaction.service.coordinator import TransactionCoordinatorService
from broker.network.router import Request
from broker.security.acl_model import ResourceType, all_operations
from broker.topics.admin import TopicAdmin
from broker.topics.catalog import OFFSETS_TOPIC, TopicCatalog, TopicError, validate_topic_name
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.unregister_broker import UnregisterBrokerRequest, UnregisterBrokerResponse
from protocol.payloads.transaction_log_records import TRANSACTION_STATE_TOPIC

SHARE_STATE_TOPIC = "__share_group_state"

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")
_NOT_REQUESTED = -2147483648


KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2  # "group:topic id:partition", a share partition's state (KIP-932)


def _share_key_valid(key: str) -> bool:
    parts = key.rsplit(":", 2)
    return len(parts) == 3 and all(parts) and parts[2].lstrip("-").isdigit() and int(parts[2]) >= 0


# A Metadata request read while a DeleteTopics of the same topic held the event loop (its catalog
# and directory fsyncs) is answered after the deletion; Kafka would answer it from the metadata
# image it was read against, where the topic still exists, and create nothing. So a topic deleted
# this recently is not auto-created again (the client is told UNKNOWN_TOPIC_OR_PARTITION and asks
# again at its next refresh): an admin recreating it just after its deletion is not beaten to it.
RECREATE_GRACE_S = 0.25


class ApiVersionsApi:
    """ApiVersions: the versions of every API in the table that the router serves."""

    def __init__(self, advertised: Callable[[], list[tuple[int, int, int]]], view: ClusterView | None = None,
                 transaction_version: int = features.TRANSACTION_VERSION_MAX) -> None:
        """``view`` names this node and its cluster, which a v5 request may say it means to reach;
        ``transaction_version`` is the finalized ``transaction.version``."""
        self.advertised = advertised
        self.view = view
        self.transaction_version = transaction_version

    def _v5_error(self, body: ApiVersionsRequest) -> int:
        """KIP-1242, as Kafka 4.4 checks it: the cluster id and the node id come together or not at
        all (INVALID_REQUEST), and a client that names them must have reached that node of that
        cluster (REBOOTSTRAP_REQUIRED: its bootstrap addresses lead elsewhere now)."""
        if (body.cluster_id is None) != (body.node_id == -1):
            return ErrorCode.INVALID_REQUEST
        if not (_SOFTWARE.match(body.client_software_name or "") and _SOFTWARE.match(body.client_software_version or "")):
            return ErrorCode.INVALID_REQUEST
        view = self.view
        if body.cluster_id is not None and view is not None and (
                body.cluster_id != view.cluster_id or body.node_id != view.node_id):
            return ErrorCode.REBOOTSTRAP_REQUIRED
        return ErrorCode.NONE

    def __call__(self, req: Request[ApiVersionsRequest]) -> None:
        body = req.body
        error: int = ErrorCode.NONE
        if req.version >= 3:
            # What the client says it is: client telemetry subscriptions match on it (KIP-714).
            req.conn.software = (body.client_software_name, body.client_software_version)
        if req.version >= 5 and (error := self._v5_error(body)):
            # Kafka answers a refused v5 request with the error alone (no APIs, no features).
            req.reply.set(ApiVersionsResponse(error_code=error, api_keys=[]))
            return
        if req.version >= 3 and not (_SOFTWARE.match(body.client_software_name or "")
                                     and _SOFTWARE.match(body.client_software_version or "")):
            error = ErrorCode.INVALID_REQUEST
        advertised = self.advertised()
        served = {k for k, _, _ in advertised}
        Supported, Finalized = ApiVersionsResponse.SupportedFeatureKey, ApiVersionsResponse.FinalizedFeatureKey
        req.reply.set(ApiVersionsResponse(
            error_code=error,
            api_keys=[ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                      for k, lo, hi in advertised],
            # The feature levels kcoord implements (broker/features.py), as Kafka 4 lists them.
            supported_features=[Supported(name=n, min_version=lo, max_version=hi)
                                for n, lo, hi in features.supported_keys(served, req.version,
                                                                         self.transaction_version)],
            finalized_features_epoch=features.FINALIZED_EPOCH,
            finalized_features=[Finalized(name=n, max_version_level=level, min_version_level=level)
                                for n, level in features.finalized_levels(served, self.transaction_version).items()],
        ))


class ClusterApis:
    """Metadata, DescribeCluster and FindCoordinator, over the cluster view, the topic catalog and
    the topic admin (which auto-creates topics)."""

    def __init__(self, view: ClusterView, catalog: TopicCatalog, admin: TopicAdmin, transactions: TransactionCoordinatorService,
                 *, auto_create_topics: bool, default_partitions: int, offsets_partitions: int,
                 share_state_partitions: int = 50) -> None:
        self.view = view
        self.share_state_partitions = share_state_partitions
        self.catalog = catalog
        self.admin = admin
        self.transactions = transactions
        self.auto_create_topics = auto_create_topics
        self.default_partitions = default_partitions
        self.offsets_partitions = offsets_partitions

    def metadata(self, req: Request[MetadataRequest]) -> None:
        body = req.body
        catalog = self.catalog
        unknown_ids: list[bytes] = []
        if body.topics is None or (req.version == 0 and not body.topics):
            names = list(catalog.topics)
        else:
            names = []
            for t in body.topics:
                if t.name is not None:
                    names.append(t.name)
                elif req.version >= 10:
                    # v12+ clients (KIP-848 consumers) ask by topic id what an assignment names.
                    by_id = catalog.by_id.get(t.topic_id)
                    if by_id is None:
                        unknown_ids.append(t.topic_id)
                    else:
                        names.append(by_id.name)
        # Without an authorizer Kafka reports every operation when asked (with one, the request
        # checks put the principal's own in their place).
        topic_ops = (all_operations(ResourceType.TOPIC) if req.version >= 8 and body.include_topic_authorized_operations
                     else _NOT_REQUESTED)
        allow_create = self.auto_create_topics and (req.version < 4 or
                                                                         body.allow_auto_topic_creation)
        topics = []
        for name in names:
            topic = catalog.get(name)
            if (topic is None and allow_create and validate_topic_name(name) is None
                    and not self.admin.deleted_within(name, RECREATE_GRACE_S)):
                try:
                    topic = self.admin.create_topic(name, self.default_partitions, {})
                except TopicError:
                    topic = catalog.get(name)
            if topic is None:
                code = (ErrorCode.INVALID_TOPIC_EXCEPTION if validate_topic_name(name)
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                topics.append(MetadataResponse.Topic(error_code=code, name=name))
                continue
            partitions = []
            for i in range(topic.partitions):
                node, epoch = self.view.leader(topic.name, i)
                replicas = [node] if node >= 0 else []
                partitions.append(MetadataResponse.Topic.Partition(
                    error_code=0 if node >= 0 else ErrorCode.LEADER_NOT_AVAILABLE, partition_index=i,
                    leader_id=node, leader_epoch=epoch, replica_nodes=replicas, isr_nodes=replicas))
            topics.append(MetadataResponse.Topic(
                error_code=0, name=topic.name, topic_id=topic.topic_id, is_internal=topic.internal,
                partitions=partitions, topic_authorized_operations=topic_ops,
            ))
        topics += [MetadataResponse.Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id)
                   for topic_id in unknown_ids]
        nodes = self.view.live_nodes(req.listener)
        req.reply.set(MetadataResponse(
            brokers=[MetadataResponse.Broker(node_id=n, host=h, port=p, rack=None) for n, h, p in nodes],
            cluster_id=self.view.cluster_id, controller_id=nodes[0][0], topics=topics,
            cluster_authorized_operations=(all_operations(ResourceType.CLUSTER) if 8 <= req.version <= 10
                                           and body.include_cluster_authorized_operations else _NOT_REQUESTED),
        ))

    def describe_cluster(self, req: Request[DescribeClusterRequest]) -> None:
        nodes = self.view.live_nodes(req.listener)
        req.reply.set(DescribeClusterResponse(
            error_code=0, error_message=None, endpoint_type=1, cluster_id=self.view.cluster_id,
            controller_id=nodes[0][0],
            brokers=[DescribeClusterResponse.Broker(broker_id=n, host=h, port=p, rack=None) for n, h, p in nodes],
            cluster_authorized_operations=(all_operations(ResourceType.CLUSTER)
                                           if req.body.include_cluster_authorized_operations else _NOT_REQUESTED),
        ))

    def unregister_broker(self, req: Request[UnregisterBrokerRequest]) -> None:
        """UnregisterBroker (``kafka-cluster.sh unregister``). A node id that is not registered is
        answered as Kafka's controller answers it. A running node is refused: Kafka removes a live
        broker's registration and leaves its process out of the cluster (every partition it leads
        without a leader, its heartbeats refused) until it restarts, while a kcoord node's
        registration is its etcd lease, which the running node holds and which ends when it stops
        (docs/limits.md)."""
        broker_id = req.body.broker_id
        if broker_id not in {node for node, _, _ in self.view.live_nodes(req.listener)}:
            req.reply.set(UnregisterBrokerResponse(
                error_code=ErrorCode.BROKER_ID_NOT_REGISTERED,
                error_message=f"Broker ID {broker_id} is not currently registered"))
            return
        req.reply.set(UnregisterBrokerResponse(
            error_code=ErrorCode.POLICY_VIOLATION,
            error_message=f"Broker {broker_id} is running: a kcoord node is unregistered when it stops "
                          "(its registration is its cluster lease), not while it runs"))

    def owner_entry(self, key: str, node: int, addresses: dict[int, tuple[str, int]],
                    no_owner: str) -> FindCoordinatorResponse.Coordinator:
        if node not in addresses:
            # Between owners (a node died and its lease has not expired yet): ask again.
            return FindCoordinatorResponse.Coordinator(key=key, node_id=-1, host="", port=-1,
                                                       error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                                       error_message=no_owner)
        host, port = addresses[node]
        return FindCoordinatorResponse.Coordinator(key=key, node_id=node, host=host, port=port, error_code=0,
                                                   error_message=None)

    def find_coordinator(self, req: Request[FindCoordinatorRequest]) -> None:
        body = req.body
        keys = body.coordinator_keys if req.version >= 4 else [body.key]
        addresses = {n: (h, p) for n, h, p in self.view.live_nodes(req.listener)}
        entries = []
        for key in keys:
            if body.key_type == KEY_TYPE_TRANSACTION and not key:
                entries.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.INVALID_REQUEST,
                    error_message="the transactional id is empty"))
            elif body.key_type == KEY_TYPE_TRANSACTION and self.view.clustered:
                # The owner of the transactional id's __transaction_state partition coordinates it.
                node, _epoch = self.view.leader(TRANSACTION_STATE_TOPIC,
                                                partition_for(key, self.transactions.num_partitions))
                entries.append(self.owner_entry(key, node, addresses,
                                                "the transactional id's partition has no owner at the moment"))
            elif body.key_type == KEY_TYPE_TRANSACTION and not self.transactions.loaded:
                entries.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                    error_message=None))
            elif body.key_type == KEY_TYPE_TRANSACTION:
                host, port = self.view.advertised
                entries.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=self.view.node_id, host=host, port=port, error_code=0, error_message=None))
            elif body.key_type == KEY_TYPE_SHARE and not _share_key_valid(key):
                entries.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.INVALID_REQUEST,
                    error_message="a share coordinator key is groupId:topicId:partition"))
            elif body.key_type == KEY_TYPE_SHARE and self.view.clustered:
                # The owner of the key's __share_group_state partition coordinates its state.
                node, _epoch = self.view.leader(SHARE_STATE_TOPIC, partition_for(key, self.share_state_partitions))
                entries.append(self.owner_entry(key, node, addresses,
                                                "the share state key's partition has no owner at the moment"))
            elif body.key_type == KEY_TYPE_SHARE:
                # A single broker coordinates every share partition's state.
                host, port = self.view.advertised
                entries.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=self.view.node_id, host=host, port=port, error_code=0, error_message=None))
            elif body.key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
                entries.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.INVALID_REQUEST,
                    error_message="kcoord coordinates groups (key type 0), transactions (1) and share "
                                  "state (2)"))
            else:
                node, _epoch = self.view.leader(OFFSETS_TOPIC, partition_for(key, self.offsets_partitions))
                entries.append(self.owner_entry(key, node, addresses,
                                                "the group's partition has no owner at the moment"))
        if req.version >= 4:
            req.reply.set(FindCoordinatorResponse(coordinators=entries))
            return
        e = entries[0]
        req.reply.set(FindCoordinatorResponse(error_code=e.error_code, error_message=e.error_message,
                                              node_id=e.node_id, host=e.host, port=e.port))
