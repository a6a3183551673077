"""ApiVersions, Metadata, DescribeCluster, FindCoordinator and DescribeConfigs:
what a client asks before it does anything else."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from broker.config import SECRET_PROPERTIES
from broker.coordinator.partitioning import partition_for
from broker.network.router import ConnectionInfo, Request
from broker.security.acl_model import ResourceType, all_operations
from broker.topics.catalog import OFFSETS_TOPIC, TopicError, owning_partition, validate_topic_name
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse

if TYPE_CHECKING:
    from broker.server import Broker

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")
_NOT_REQUESTED = -2147483648
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


def register(broker: Broker) -> None:
    router = broker.router
    cluster = broker.cluster
    offsets_partitions = broker.config["offsets.topic.num.partitions"]

    def live_nodes(conn: ConnectionInfo) -> list[tuple[int, str, int]]:
        """(node id, host, port) of every node clients may talk to: this one alone, or every node
        registered in the cluster. This node is given as the listener the client came in through."""
        host, port = broker.advertised_for(conn)
        if cluster is None:
            return [(broker.node_id, host, port)]
        nodes = {node: cluster.node_listeners.get(node, {}).get(conn.listener, address)
                 for node, address in cluster.nodes.items()}
        nodes[broker.node_id] = (host, port)
        return [(node, h, p) for node, (h, p) in sorted(nodes.items())]

    def leader(topic: str, partition: int) -> tuple[int, int]:
        """(leader node, leader epoch) of a partition; (-1, -1) while nobody owns it."""
        if cluster is None:
            return broker.node_id, 0
        owner = cluster.owner_of(owning_partition(topic, partition))
        if owner is None:
            return -1, -1
        return owner[0], owner[1] & 0x7FFFFFFF

    def api_versions(req: Request[ApiVersionsRequest]) -> None:
        body = req.body
        error = ErrorCode.NONE
        if req.version >= 3 and not (_SOFTWARE.match(body.client_software_name or "")
                                     and _SOFTWARE.match(body.client_software_version or "")):
            error = ErrorCode.INVALID_REQUEST
        req.reply.set(ApiVersionsResponse(
            error_code=error,
            api_keys=[ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                      for k, lo, hi in router.advertised()],
        ))

    def metadata(req: Request[MetadataRequest]) -> None:
        body = req.body
        catalog = broker.catalog
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
        allow_create = broker.config["auto.create.topics.enable"] and (req.version < 4 or
                                                                         body.allow_auto_topic_creation)
        topics = []
        for name in names:
            topic = catalog.get(name)
            if topic is None and allow_create and validate_topic_name(name) is None:
                try:
                    topic = broker.create_topic(name, broker.config["num.partitions"], {})
                except TopicError:
                    topic = catalog.get(name)
            if topic is None:
                code = (ErrorCode.INVALID_TOPIC_EXCEPTION if validate_topic_name(name)
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                topics.append(MetadataResponse.Topic(error_code=code, name=name))
                continue
            partitions = []
            for i in range(topic.partitions):
                node, epoch = leader(topic.name, i)
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
        nodes = live_nodes(req.conn)
        req.reply.set(MetadataResponse(
            brokers=[MetadataResponse.Broker(node_id=n, host=h, port=p, rack=None) for n, h, p in nodes],
            cluster_id=broker.cluster_id, controller_id=nodes[0][0], topics=topics,
            cluster_authorized_operations=(all_operations(ResourceType.CLUSTER) if 8 <= req.version <= 10
                                           and body.include_cluster_authorized_operations else _NOT_REQUESTED),
        ))

    def describe_cluster(req: Request[DescribeClusterRequest]) -> None:
        nodes = live_nodes(req.conn)
        req.reply.set(DescribeClusterResponse(
            error_code=0, error_message=None, endpoint_type=1, cluster_id=broker.cluster_id,
            controller_id=nodes[0][0],
            brokers=[DescribeClusterResponse.Broker(broker_id=n, host=h, port=p, rack=None) for n, h, p in nodes],
            cluster_authorized_operations=(all_operations(ResourceType.CLUSTER)
                                           if req.body.include_cluster_authorized_operations else _NOT_REQUESTED),
        ))

    def find_coordinator(req: Request[FindCoordinatorRequest]) -> None:
        body = req.body
        keys = body.coordinator_keys if req.version >= 4 else [body.key]
        addresses = {n: (h, p) for n, h, p in live_nodes(req.conn)}
        entries = []
        for key in keys:
            if body.key_type == KEY_TYPE_TRANSACTION and not key:
                entries.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.INVALID_REQUEST,
                    error_message="the transactional id is empty"))
            elif body.key_type == KEY_TYPE_TRANSACTION and cluster is not None:
                entries.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.INVALID_REQUEST,
                    error_message="transactions are served by a single-node broker only, not in cluster mode"))
            elif body.key_type == KEY_TYPE_TRANSACTION and not broker.transactions.loaded:
                entries.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                    error_message=None))
            elif body.key_type == KEY_TYPE_TRANSACTION:
                host, port = broker.advertised
                entries.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=broker.node_id, host=host, port=port, error_code=0, error_message=None))
            elif body.key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
                entries.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.INVALID_REQUEST,
                    error_message="kcoord coordinates consumer groups and transactions only (key types 0 "
                                  "and 1); share groups are not supported"))
            else:
                node, _epoch = leader(OFFSETS_TOPIC, partition_for(key, offsets_partitions))
                if node not in addresses:
                    # Between owners (a node died and its lease has not expired yet): ask again.
                    entries.append(FindCoordinatorResponse.Coordinator(
                        key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        error_message="the group's partition has no owner at the moment"))
                    continue
                host, port = addresses[node]
                entries.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=node, host=host, port=port, error_code=0, error_message=None))
        if req.version >= 4:
            req.reply.set(FindCoordinatorResponse(coordinators=entries))
            return
        e = entries[0]
        req.reply.set(FindCoordinatorResponse(error_code=e.error_code, error_message=e.error_message,
                                              node_id=e.node_id, host=e.host, port=e.port))

    def describe_configs(req: Request[DescribeConfigsRequest]) -> None:
        results = []
        for res in req.body.resources:
            configs: dict[str, str] = {}
            error, message = ErrorCode.NONE, None
            if res.resource_type == 2:  # topic
                topic = broker.catalog.get(res.resource_name)
                if topic is None:
                    error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown topic"
                else:
                    configs = broker.topic_configs(topic)
            elif res.resource_type == 4:  # broker
                configs = {k: str(v) for k, v in broker.config.values.items()}
            else:
                error, message = ErrorCode.INVALID_REQUEST, f"resource type {res.resource_type} not supported"
            wanted = res.configuration_keys
            secret = SECRET_PROPERTIES if res.resource_type == 4 else frozenset()
            entries = [DescribeConfigsResponse.Result.ResourceResult(
                name=k, value=None if k in secret else v, read_only=False, config_source=5, is_sensitive=k in secret)
                for k, v in sorted(configs.items()) if wanted is None or k in wanted]
            results.append(DescribeConfigsResponse.Result(
                error_code=error, error_message=message, resource_type=res.resource_type,
                resource_name=res.resource_name, configs=entries))
        req.reply.set(DescribeConfigsResponse(results=results))

    router.register(ApiVersionsRequest, ApiVersionsResponse, api_versions)
    router.register(MetadataRequest, MetadataResponse, metadata)
    router.register(DescribeClusterRequest, DescribeClusterResponse, describe_cluster)
    router.register(FindCoordinatorRequest, FindCoordinatorResponse, find_coordinator)
    router.register(DescribeConfigsRequest, DescribeConfigsResponse, describe_configs)
