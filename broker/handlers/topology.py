"""Where partitions live and who leads them, as Kafka 4.4 answers: DescribeTopicPartitions (KIP-966),
ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments (KIP-455), DescribeQuorum
and UpdateFeatures.

Every partition of kcoord has one replica: this node alone, or in a cluster the node that owns it
(``ClusterView.leader``). Its replica set, its ISR and its preferred leader are that node, its
eligible leader replicas are empty, and no reassignment is ever in progress: kcoord places
partitions itself (rendezvous hashing in a cluster), so a reassignment can only name the replica a
partition already has. The answers follow Kafka's controller for such a cluster, error codes and
messages included (checked against Kafka 4.4 by tests/differential/test_topology.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from broker import features
from broker.cluster.view import ClusterView
from broker.network.router import Request
from broker.security.acl_model import Operation, ResourceType, all_operations
from broker.security.authorizer import Authorizer
from broker.topics.catalog import TopicCatalog, validate_topic_name
from protocol.errors import ErrorCode
from protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from protocol.messages.update_features import UpdateFeaturesRequest, UpdateFeaturesResponse

NOT_REQUESTED = -2147483648
ZERO_UUID = bytes(16)
# Kafka's max.request.partition.size.limit: the most partitions one DescribeTopicPartitions answers.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
# The metadata log's name in DescribeQuorum (Kafka's __cluster_metadata, partition 0).
METADATA_TOPIC = "__cluster_metadata"
ELECTION_PREFERRED, ELECTION_UNCLEAN = 0, 1
# UpdateFeatures' upgrade types (v1+): upgrade, safe downgrade, unsafe downgrade.
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3

DTPTopic = DescribeTopicPartitionsResponse.Topic
DTPPartition = DTPTopic.Partition


class TopologyApis:
    """DescribeTopicPartitions, ElectLeaders, Alter/ListPartitionReassignments, DescribeQuorum and
    UpdateFeatures, over the cluster view and the topic catalog. ``authorizer`` (None without
    one) is what DescribeTopicPartitions checks each topic with while it pages, as Kafka does;
    ``served_keys`` gives the API keys the broker serves (the feature levels follow them)."""

    def __init__(self, view: ClusterView, catalog: TopicCatalog, authorizer: Authorizer | None,
                 served_keys: Callable[[], Collection[int]], clock: Callable[[], int],
                 transaction_version: int = features.TRANSACTION_VERSION_MAX) -> None:
        self.transaction_version = transaction_version
        self.view = view
        self.catalog = catalog
        self.authorizer = authorizer
        self.served_keys = served_keys
        self.clock = clock

    # ---- one replica per partition ------------------------------------------------------------

    def _replicas(self, topic: str, index: int) -> tuple[int, int, list[int]]:
        """(leader, leader epoch, replicas) of a partition; no replica while nobody owns it."""
        node, epoch = self.view.leader(topic, index)
        return node, max(epoch, 0), [node] if node >= 0 else []

    def _partitions(self, topic: str) -> int | None:
        found = self.catalog.get(topic)
        return None if found is None else found.partitions

    # ---- DescribeTopicPartitions ----------------------------------------------------------------

    def describe_topic_partitions(self, req: Request[DescribeTopicPartitionsRequest]) -> None:
        body = req.body
        cursor = body.cursor
        cursor_topic = cursor.topic_name if cursor is not None else ""
        fetch_all = not body.topics
        if fetch_all:
            names = {n for n in self.catalog.topics if n >= cursor_topic}
        else:
            names = {t.name for t in body.topics if t.name >= cursor_topic}
            if cursor is not None and cursor.topic_name not in names:
                req.reply.set(describe_topic_partitions_error(body, ErrorCode.INVALID_REQUEST))
                return
        if "" in names:
            # Kafka fails the whole request on an empty topic name (the authorizer refuses it).
            req.reply.set(describe_topic_partitions_error(body, ErrorCode.UNKNOWN_SERVER_ERROR))
            return
        may = self._may_describe(req)
        denied = [n for n in names if not may(n)]
        allowed = sorted(n for n in names if may(n))
        first_index = cursor.partition_index if cursor is not None and cursor_topic and may(cursor_topic) else 0
        # Kafka answers at least one partition, whatever the limit asked for.
        remaining = max(1, min(MAX_REQUEST_PARTITION_SIZE_LIMIT, body.response_partition_limit))
        topics: list[DTPTopic] = []
        next_cursor = None
        for name in allowed:
            if remaining == 0:
                # The cursor names the next topic from its start (whether it exists or not).
                next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name, partition_index=0)
                break
            count = self._partitions(name)
            if count is None:
                if not fetch_all:
                    code = (ErrorCode.INVALID_TOPIC_EXCEPTION if validate_topic_name(name)
                            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    topics.append(DTPTopic(error_code=code, name=name, topic_id=ZERO_UUID,
                                           is_internal=self._internal(name), partitions=[]))
                continue
            start = first_index if name == cursor_topic else 0
            upper = min(count, start + remaining)
            partitions = [self._dtp_partition(name, i) for i in range(max(start, 0), upper)]
            topic = self.catalog.get(name)
            assert topic is not None
            topics.append(DTPTopic(error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id,
                                   is_internal=topic.internal, partitions=partitions))
            if upper < count:
                next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name, partition_index=upper)
                break
            remaining -= len(partitions)
        for t in topics:
            t.topic_authorized_operations = self._topic_operations(req, t.name or "")
        topics += [DTPTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=n, topic_id=ZERO_UUID,
                            is_internal=False, partitions=[]) for n in sorted(denied)] if not fetch_all else []
        req.reply.set(DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics, next_cursor=next_cursor))

    def _dtp_partition(self, topic: str, index: int) -> DTPPartition:
        leader, epoch, replicas = self._replicas(topic, index)
        # One replica: in sync while it leads, and never an eligible leader replica (ELR is empty).
        return DTPPartition(error_code=ErrorCode.NONE, partition_index=index, leader_id=leader, leader_epoch=epoch,
                            replica_nodes=replicas, isr_nodes=list(replicas), eligible_leader_replicas=[],
                            last_known_elr=[], offline_replicas=[])

    def _internal(self, name: str) -> bool:
        topic = self.catalog.get(name)
        return topic.internal if topic is not None else name in ("__consumer_offsets", "__transaction_state",
                                                                 "__share_group_state")

    def _may_describe(self, req: Request[DescribeTopicPartitionsRequest]) -> Callable[[str], bool]:
        authorizer = self.authorizer
        if authorizer is None:
            return lambda name: True
        principal, host = req.principal, req.client_host

        def may(name: str) -> bool:
            return authorizer.authorize(principal, host, Operation.DESCRIBE, ResourceType.TOPIC, name)
        return may

    def _topic_operations(self, req: Request[DescribeTopicPartitionsRequest], name: str) -> int:
        if self.authorizer is None:
            return all_operations(ResourceType.TOPIC)
        return self.authorizer.authorized_operations(req.principal, req.client_host, ResourceType.TOPIC, name)

    # ---- ElectLeaders -------------------------------------------------------------------------

    def elect_leaders(self, req: Request[ElectLeadersRequest]) -> None:
        body = req.body
        election = body.election_type if req.version >= 1 else ELECTION_PREFERRED
        if election not in (ELECTION_PREFERRED, ELECTION_UNCLEAN):
            req.reply.set(elect_leaders_error(req, ErrorCode.INVALID_REQUEST, f"Unknown election type {election}"))
            return
        if body.timeout_ms <= 0:
            # Kafka's controller takes the request past its deadline before it elects anything.
            req.reply.set(elect_leaders_error(req, ErrorCode.REQUEST_TIMED_OUT, None))
            return
        Result = ElectLeadersResponse.ReplicaElectionResult
        results = []
        if body.topic_partitions is None:
            # Every partition; those that already have the leader the election would choose are left out.
            for name in self.catalog.topics:
                count = self._partitions(name) or 0
                outcomes = [self._elect(name, i, election) for i in range(count)]
                results.append(Result(topic=name, partition_result=[
                    o for o in outcomes if o.error_code != ErrorCode.ELECTION_NOT_NEEDED]))
        else:
            for t in body.topic_partitions:
                results.append(Result(topic=t.topic, partition_result=[self._elect(t.topic, i, election)
                                                                        for i in t.partitions]))
        req.reply.set(ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                           replica_election_results=results))

    def _elect(self, topic: str, index: int, election: int) -> ElectLeadersResponse.ReplicaElectionResult.PartitionResult:
        PartitionResult = ElectLeadersResponse.ReplicaElectionResult.PartitionResult
        count = self._partitions(topic)
        if count is None:
            return PartitionResult(partition_id=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   error_message=f"No such topic as {topic}")
        if not 0 <= index < count:
            return PartitionResult(partition_id=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   error_message=f"No such partition as {topic}-{index}")
        leader, _epoch, _replicas = self._replicas(topic, index)
        if leader >= 0:
            # The only replica leads: it is the preferred leader, and a leader exists.
            return PartitionResult(partition_id=index, error_code=ErrorCode.ELECTION_NOT_NEEDED,
                                   error_message="Leader election not needed for topic partition.")
        # Nobody owns it (a node died and its lease has not expired): no replica can be elected;
        # the cluster hands the partition to a live node on its own.
        code = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if election == ELECTION_PREFERRED
                else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
        return PartitionResult(partition_id=index, error_code=code, error_message=None)

    # ---- partition reassignments --------------------------------------------------------------

    def alter_partition_reassignments(self, req: Request[AlterPartitionReassignmentsRequest]) -> None:
        body = req.body
        if body.timeout_ms <= 0:
            req.reply.set(alter_partition_reassignments_error(req, ErrorCode.REQUEST_TIMED_OUT))
            return
        Topic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
        Partition = Topic.ReassignablePartitionResponse
        responses = []
        for t in body.topics:
            partitions = []
            for p in t.partitions:
                code, message = self._reassign(t.name, p.partition_index, p.replicas)
                partitions.append(Partition(partition_index=p.partition_index, error_code=code, error_message=message))
            responses.append(Topic(name=t.name, partitions=partitions))
        req.reply.set(AlterPartitionReassignmentsResponse(
            throttle_time_ms=0, allow_replication_factor_change=body.allow_replication_factor_change,
            error_code=ErrorCode.NONE, error_message=None if body.topics else "", responses=responses))

    def _reassign(self, topic: str, index: int, replicas: list[int] | None) -> tuple[int, str | None]:
        """Kafka's controller on a reassignment of one partition of a one-replica cluster."""
        count = self._partitions(topic)
        if count is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
        if not 0 <= index < count:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{index}."
        if replicas is None:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
        if not replicas:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
        live = {n for n, _h, _p in self.view.live_nodes("")}
        seen: set[int] = set()
        for broker in sorted(replicas):
            if broker not in live:
                return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"The manual partition assignment includes broker {broker}, but no such broker is registered.")
            if broker in seen:
                return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"The manual partition assignment includes the broker {broker} more than once.")
            seen.add(broker)
        _leader, _epoch, current = self._replicas(topic, index)
        if list(replicas) == current:
            return ErrorCode.NONE, None  # what it has already: Kafka completes it at once
        # Another node, or more than one: kcoord places every partition itself, one replica each.
        return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"kcoord keeps one replica per partition on the node it assigns ({current or 'none now'}); "
                f"the partition cannot be moved to {list(replicas)}.")

    def list_partition_reassignments(self, req: Request[ListPartitionReassignmentsRequest]) -> None:
        # No reassignment is ever in progress.
        req.reply.set(ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                                         error_message=None, topics=[]))

    # ---- DescribeQuorum -----------------------------------------------------------------------

    def describe_quorum(self, req: Request[DescribeQuorumRequest]) -> None:
        """The node that decides kcoord's metadata (topics, partitions, their leaders) answers as
        the one voter of a quorum without followers: this node alone, or in a cluster the node
        reported as controller (the lowest live node id; the metadata itself is in etcd, whose
        own quorum kcoord does not describe). Its log end offset and high watermark are 0: there
        is no metadata log to count. docs/cluster.md says why."""
        TopicData = DescribeQuorumResponse.TopicData
        PartitionData = TopicData.PartitionData
        asked = req.body.topics
        if not (len(asked) == 1 and asked[0].topic_name == METADATA_TOPIC and len(asked[0].partitions) == 1
                and asked[0].partitions[0].partition_index == 0):
            # Kafka's KRaft client answers exactly one partition, __cluster_metadata-0, and fails
            # every partition of any other request.
            req.reply.set(DescribeQuorumResponse(error_code=ErrorCode.NONE, error_message="", nodes=[], topics=[
                TopicData(topic_name=t.topic_name, partitions=[PartitionData(
                    partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message="This server does not host this topic-partition.", leader_id=0,
                    leader_epoch=0, high_watermark=0, current_voters=[], observers=[]) for p in t.partitions])
                for t in asked]))
            return
        leader, host, port = self.view.live_nodes(req.listener)[0]
        now = self.clock()
        voter = PartitionData.ReplicaState(replica_id=leader, replica_directory_id=ZERO_UUID, log_end_offset=0,
                                           last_fetch_timestamp=now, last_caught_up_timestamp=now)
        Node = DescribeQuorumResponse.Node
        req.reply.set(DescribeQuorumResponse(
            error_code=ErrorCode.NONE, error_message="",
            topics=[TopicData(topic_name=METADATA_TOPIC, partitions=[PartitionData(
                partition_index=0, error_code=ErrorCode.NONE, error_message="", leader_id=leader, leader_epoch=1,
                high_watermark=0, current_voters=[voter], observers=[])])],
            nodes=[Node(node_id=leader, listeners=[Node.Listener(name=req.listener, host=host, port=port)])]))

    # ---- UpdateFeatures -----------------------------------------------------------------------

    def update_features(self, req: Request[UpdateFeaturesRequest]) -> None:
        """Validated as Kafka's controller validates; every level kcoord reports is the only one
        it implements, so the updates that pass are those that keep a level where it is."""
        body = req.body
        levels = {f.name: f for f in features.features(self.served_keys(), self.transaction_version)}
        for update in body.feature_updates:
            problem = _feature_problem(update, levels, req.version, self.view.node_id)
            if problem is not None:
                req.reply.set(UpdateFeaturesResponse(
                    throttle_time_ms=0, error_code=ErrorCode.INVALID_UPDATE_VERSION,
                    error_message="The update failed for all features since the following feature had an error: "
                                  + problem, results=[]))
                return
        Result = UpdateFeaturesResponse.UpdatableFeatureResult
        req.reply.set(UpdateFeaturesResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
            results=[Result(feature=u.feature, error_code=ErrorCode.NONE, error_message=None)
                     for u in body.feature_updates] if req.version < 2 else []))


def _feature_problem(update: UpdateFeaturesRequest.FeatureUpdateKey, levels: dict[str, features.Feature],
                     version: int, node_id: int) -> str | None:
    """Why Kafka's controller would refuse this update on kcoord, or None when the level stays."""
    name, level = update.feature, update.max_version_level
    if version == 0:
        upgrade_type = SAFE_DOWNGRADE if update.allow_downgrade else UPGRADE
    else:
        upgrade_type = update.upgrade_type
    prefix = f"Invalid update version {level} for feature {name}."
    feature = levels.get(name)
    if feature is None:
        return f"{prefix} Local controller {node_id} does not support this feature."
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return f"{prefix} The controller does not support the given upgrade type."
    if level < 0:
        return f"{prefix} A feature version cannot be less than 0."
    current = feature.level
    if level < current and upgrade_type == UPGRADE:
        return (f"{prefix} Can't downgrade the version of this feature without setting the upgrade type to "
                "either safe or unsafe downgrade.")
    if name == features.METADATA_VERSION and level < current:
        reason = ("Refusing to perform the requested downgrade because it might delete metadata information."
                  if upgrade_type == SAFE_DOWNGRADE else "Unsafe metadata downgrade is not supported in this version.")
        return f"Unsupported metadata.version downgrade from {current} to {level}. {reason}"
    if level != current:
        # Kafka lists the range a controller supports; kcoord supports only the level it runs at.
        low = feature.min_level if name == features.METADATA_VERSION else current
        return f"{prefix} Local controller {node_id} only supports versions {low}-{current}"
    return None


def describe_topic_partitions_error(body: DescribeTopicPartitionsRequest, code: int) -> DescribeTopicPartitionsResponse:
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, next_cursor=None, topics=[
        DTPTopic(error_code=code, name=t.name, topic_id=ZERO_UUID, is_internal=False, partitions=[])
        for t in body.topics])


def elect_leaders_error(req: Request[ElectLeadersRequest], code: int,
                        message: str | None) -> ElectLeadersResponse:
    """Every asked partition, and the request, failed with ``code``."""
    Result = ElectLeadersResponse.ReplicaElectionResult
    return ElectLeadersResponse(throttle_time_ms=0, error_code=code, replica_election_results=[
        Result(topic=t.topic, partition_result=[Result.PartitionResult(partition_id=p, error_code=code,
                                                                       error_message=message)
                                                for p in t.partitions])
        for t in req.body.topic_partitions or []])


def alter_partition_reassignments_error(req: Request[AlterPartitionReassignmentsRequest],
                                        code: int) -> AlterPartitionReassignmentsResponse:
    Topic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, allow_replication_factor_change=req.body.allow_replication_factor_change,
        error_code=code, error_message=None, responses=[Topic(name=t.name, partitions=[
            Topic.ReassignablePartitionResponse(partition_index=p.partition_index, error_code=code,
                                                error_message=None) for p in t.partitions])
            for t in req.body.topics])
