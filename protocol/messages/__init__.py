"""The message tables of every API this broker speaks, keyed by API key.

Being here makes an API decodable (tools, tests), not served: the broker serves, and advertises in
ApiVersions, exactly the APIs of its table in ``broker/apis.py`` (``api_table``), which the router
installs (``router_apis``).
"""

from __future__ import annotations

from enum import IntEnum

from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from protocol.messages.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
from protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
)
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
)
from protocol.messages.delete_share_group_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
)
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from protocol.messages.describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from protocol.messages.describe_producers import DescribeProducersRequest, DescribeProducersResponse
from protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)
from protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from protocol.messages.describe_transactions import DescribeTransactionsRequest, DescribeTransactionsResponse
from protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.get_telemetry_subscriptions import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.initialize_share_group_state import (
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
)
from protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from protocol.messages.list_config_resources import ListConfigResourcesRequest, ListConfigResourcesResponse
from protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.messages.push_telemetry import PushTelemetryRequest, PushTelemetryResponse
from protocol.messages.read_share_group_state import ReadShareGroupStateRequest, ReadShareGroupStateResponse
from protocol.messages.read_share_group_state_summary import (
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
)
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from protocol.messages.share_acknowledge import ShareAcknowledgeRequest, ShareAcknowledgeResponse
from protocol.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from protocol.messages.share_group_describe import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest, StreamsGroupDescribeResponse
from protocol.messages.streams_group_heartbeat import (
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
)
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from protocol.messages.unregister_broker import UnregisterBrokerRequest, UnregisterBrokerResponse
from protocol.messages.update_features import UpdateFeaturesRequest, UpdateFeaturesResponse
from protocol.messages.write_share_group_state import (
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from protocol.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from protocol.schema import Message


class ApiKey(IntEnum):
    """Kafka's API keys, spelled as in the protocol guide (``ApiKey.JoinGroup``)."""

    Produce = 0
    Fetch = 1
    ListOffsets = 2
    Metadata = 3
    OffsetCommit = 8
    OffsetFetch = 9
    FindCoordinator = 10
    JoinGroup = 11
    Heartbeat = 12
    LeaveGroup = 13
    SyncGroup = 14
    DescribeGroups = 15
    ListGroups = 16
    SaslHandshake = 17
    ApiVersions = 18
    CreateTopics = 19
    DeleteTopics = 20
    DeleteRecords = 21
    InitProducerId = 22
    OffsetForLeaderEpoch = 23
    AddPartitionsToTxn = 24
    AddOffsetsToTxn = 25
    EndTxn = 26
    WriteTxnMarkers = 27
    TxnOffsetCommit = 28
    DescribeAcls = 29
    CreateAcls = 30
    DeleteAcls = 31
    DescribeConfigs = 32
    AlterReplicaLogDirs = 34
    DescribeLogDirs = 35
    AlterConfigs = 33
    SaslAuthenticate = 36
    CreatePartitions = 37
    DeleteGroups = 42
    IncrementalAlterConfigs = 44
    OffsetDelete = 47
    DescribeClientQuotas = 48
    AlterClientQuotas = 49
    DescribeUserScramCredentials = 50
    AlterUserScramCredentials = 51
    DescribeCluster = 60
    DescribeProducers = 61
    UnregisterBroker = 64
    DescribeTransactions = 65
    ListTransactions = 66
    ConsumerGroupHeartbeat = 68
    ConsumerGroupDescribe = 69
    # Topology and features: partition placement, leaders, the quorum, feature levels.
    ElectLeaders = 43
    AlterPartitionReassignments = 45
    ListPartitionReassignments = 46
    DescribeQuorum = 55
    UpdateFeatures = 57
    DescribeTopicPartitions = 75
    GetTelemetrySubscriptions = 71
    PushTelemetry = 72
    ListConfigResources = 74
    StreamsGroupHeartbeat = 88
    StreamsGroupDescribe = 89
    ShareGroupHeartbeat = 76
    ShareGroupDescribe = 77
    ShareFetch = 78
    ShareAcknowledge = 79
    DescribeShareGroupOffsets = 90
    AlterShareGroupOffsets = 91
    DeleteShareGroupOffsets = 92
    # Between the nodes of a cluster: share partitions' leaders and the share coordinator.
    InitializeShareGroupState = 83
    ReadShareGroupState = 84
    WriteShareGroupState = 85
    DeleteShareGroupState = 86
    ReadShareGroupStateSummary = 87


_PAIRS: list[tuple[Message, Message]] = [
    (ProduceRequest, ProduceResponse),
    (FetchRequest, FetchResponse),
    (ListOffsetsRequest, ListOffsetsResponse),
    (MetadataRequest, MetadataResponse),
    (OffsetCommitRequest, OffsetCommitResponse),
    (OffsetFetchRequest, OffsetFetchResponse),
    (FindCoordinatorRequest, FindCoordinatorResponse),
    (JoinGroupRequest, JoinGroupResponse),
    (HeartbeatRequest, HeartbeatResponse),
    (LeaveGroupRequest, LeaveGroupResponse),
    (SyncGroupRequest, SyncGroupResponse),
    (DescribeGroupsRequest, DescribeGroupsResponse),
    (ListGroupsRequest, ListGroupsResponse),
    (SaslHandshakeRequest, SaslHandshakeResponse),
    (ApiVersionsRequest, ApiVersionsResponse),
    (CreateTopicsRequest, CreateTopicsResponse),
    (DeleteTopicsRequest, DeleteTopicsResponse),
    (InitProducerIdRequest, InitProducerIdResponse),
    (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
    (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
    (EndTxnRequest, EndTxnResponse),
    (WriteTxnMarkersRequest, WriteTxnMarkersResponse),
    (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    (DescribeAclsRequest, DescribeAclsResponse),
    (CreateAclsRequest, CreateAclsResponse),
    (DeleteAclsRequest, DeleteAclsResponse),
    (DescribeConfigsRequest, DescribeConfigsResponse),
    (SaslAuthenticateRequest, SaslAuthenticateResponse),
    (CreatePartitionsRequest, CreatePartitionsResponse),
    (DeleteGroupsRequest, DeleteGroupsResponse),
    (OffsetDeleteRequest, OffsetDeleteResponse),
    (DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse),
    (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse),
    (DescribeClusterRequest, DescribeClusterResponse),
    (UnregisterBrokerRequest, UnregisterBrokerResponse),
    (DescribeTransactionsRequest, DescribeTransactionsResponse),
    (ListTransactionsRequest, ListTransactionsResponse),
    (ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse),
    (ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse),
    # Topology and features.
    (ElectLeadersRequest, ElectLeadersResponse),
    (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse),
    (ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse),
    (DescribeQuorumRequest, DescribeQuorumResponse),
    (UpdateFeaturesRequest, UpdateFeaturesResponse),
    (DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse),
    (DescribeClientQuotasRequest, DescribeClientQuotasResponse),
    (AlterClientQuotasRequest, AlterClientQuotasResponse),
    (GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse),
    (PushTelemetryRequest, PushTelemetryResponse),
    # Records and log directories.
    (DeleteRecordsRequest, DeleteRecordsResponse),
    (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    (AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse),
    (DescribeLogDirsRequest, DescribeLogDirsResponse),
    (DescribeProducersRequest, DescribeProducersResponse),
    # Configs.
    (AlterConfigsRequest, AlterConfigsResponse),
    (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
    (ListConfigResourcesRequest, ListConfigResourcesResponse),
    (StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse),
    (StreamsGroupDescribeRequest, StreamsGroupDescribeResponse),
    (ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse),
    (ShareGroupDescribeRequest, ShareGroupDescribeResponse),
    (ShareFetchRequest, ShareFetchResponse),
    (InitializeShareGroupStateRequest, InitializeShareGroupStateResponse),
    (ReadShareGroupStateRequest, ReadShareGroupStateResponse),
    (WriteShareGroupStateRequest, WriteShareGroupStateResponse),
    (DeleteShareGroupStateRequest, DeleteShareGroupStateResponse),
    (ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse),
    (ShareAcknowledgeRequest, ShareAcknowledgeResponse),
    (DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse),
    (AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse),
    (DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse),
]

REQUESTS: dict[int, Message] = {req.api_key: req for req, _ in _PAIRS if req.api_key is not None}
RESPONSES: dict[int, Message] = {resp.api_key: resp for _, resp in _PAIRS if resp.api_key is not None}

__all__ = ["REQUESTS", "RESPONSES", "ApiKey"]
