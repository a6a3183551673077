"""Every API kcoord serves, declared once: its request and response, the versions served, the
handler, the authorization rule, and how a refused or failed request is answered.

The router serves exactly these APIs (``router_apis``), ApiVersions advertises them, and the
authorizer checks each request with its entry's rule before the handler runs. Adding an API is
one ``api(...)`` entry here, its handler (a method of a class in ``broker/handlers/``, given the
services it needs by ``broker/app.py``) and its tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

from broker.handlers import refusals, share_state
from broker.handlers.acls import AclApis
from broker.handlers.client_quotas import ClientQuotaApis
from broker.handlers.cluster import ApiVersionsApi, ClusterApis
from broker.handlers.configs import ConfigApis
from broker.handlers.create_partitions import CreatePartitionsApi
from broker.handlers.delegation_tokens import DelegationTokenApis
from broker.handlers.fetch import FetchApi
from broker.handlers.groups import (
    GroupApis,
    commit_error,
    consumer_describe_error,
    consumer_heartbeat_error,
    delete_groups_error,
    delete_offsets_error,
    describe_groups_error,
    heartbeat_error,
    join_error,
    leave_error,
    list_groups_error,
    offset_fetch_error,
    sync_error,
    txn_commit_error,
)
from broker.handlers.list_offsets import ListOffsetsApi
from broker.handlers.log_dirs import LogDirApis
from broker.handlers.produce import ProduceApi
from broker.handlers.records import RecordApis
from broker.handlers.request_checks import RequestChecks
from broker.handlers.sasl import SaslApis
from broker.handlers.scram_credentials import ScramCredentialApis
from broker.handlers.share import (
    ShareApis,
    share_acknowledge_error,
    share_describe_error,
    share_fetch_error,
    share_heartbeat_error,
)
from broker.handlers.share_admin import ShareOffsetApis
from broker.handlers.share_admin import alter_offsets_error as alter_share_offsets_error
from broker.handlers.share_admin import delete_offsets_error as delete_share_offsets_error
from broker.handlers.share_admin import describe_offsets_error as describe_share_offsets_error
from broker.handlers.share_state import ShareStateApis
from broker.handlers.streams_groups import StreamsGroupApis
from broker.handlers.streams_groups import describe_error as streams_describe_error
from broker.handlers.streams_groups import heartbeat_error as streams_heartbeat_error
from broker.handlers.streams_groups import (
    topology_description_update_error as streams_topology_description_update_error,
)
from broker.handlers.telemetry import TelemetryApis
from broker.handlers.topics import TopicApis
from broker.handlers.topology import TopologyApis
from broker.handlers.transactions import (
    ADD_PARTITIONS_MAX_VERSION,
    END_TXN_MAX_VERSION,
    TransactionApis,
)
from broker.handlers.write_txn_markers import WriteTxnMarkersApi
from broker.handlers.write_txn_markers import refused as write_txn_markers_refused
from broker.network.router import Api, Authorize, Handler, Request
from protocol.messages import RESPONSES, ApiKey
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from protocol.messages.alter_client_quotas import AlterClientQuotasRequest
from protocol.messages.alter_configs import AlterConfigsRequest
from protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest
from protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.create_acls import CreateAclsRequest
from protocol.messages.create_delegation_token import CreateDelegationTokenRequest
from protocol.messages.create_partitions import CreatePartitionsRequest
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.delete_acls import DeleteAclsRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.delete_records import DeleteRecordsRequest
from protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest
from protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.describe_acls import DescribeAclsRequest
from protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.describe_delegation_token import DescribeDelegationTokenRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from protocol.messages.describe_producers import DescribeProducersRequest
from protocol.messages.describe_quorum import DescribeQuorumRequest
from protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from protocol.messages.describe_transactions import DescribeTransactionsRequest
from protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest
from protocol.messages.elect_leaders import ElectLeadersRequest
from protocol.messages.end_txn import EndTxnRequest
from protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest
from protocol.messages.fetch import FetchRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.get_telemetry_subscriptions import GetTelemetrySubscriptionsRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.list_config_resources import ListConfigResourcesRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from protocol.messages.list_transactions import ListTransactionsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from protocol.messages.produce import ProduceRequest
from protocol.messages.push_telemetry import PushTelemetryRequest
from protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest
from protocol.messages.renew_delegation_token import RenewDelegationTokenRequest
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from protocol.messages.share_fetch import ShareFetchRequest
from protocol.messages.share_group_describe import ShareGroupDescribeRequest
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest
from protocol.messages.streams_group_topology_description_update import (
    StreamsGroupTopologyDescriptionUpdateRequest,
)
from protocol.messages.sync_group import SyncGroupRequest
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from protocol.messages.unregister_broker import UnregisterBrokerRequest
from protocol.messages.update_features import UpdateFeaturesRequest
from protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from protocol.schema import Data, Message

if TYPE_CHECKING:
    from protocol.schema import MessageData

# The request of one entry (a string bound: ``MessageData`` exists for type checkers only).
R = TypeVar("R", bound="MessageData")
# How an API answers a request refused (by the authorizer) or failed as a whole, with one error code.
ErasedRefuse = Callable[[Request[Data], int], Data]
# An authorization rule: the checks, the request and how its API refuses; True when it answered.
ErasedRule = Callable[[RequestChecks, Request[Data], ErasedRefuse], bool]

# The rule of APIs that every client may call.
OPEN_TO_ALL = RequestChecks.open_to_all


@dataclass(frozen=True, slots=True)
class ApiEntry:
    """One API as the table declares it (``api`` builds it, typed for its request)."""

    key: int
    name: str
    request: Message
    response: Message
    versions: tuple[int, int]
    handler: Handler
    authorize: ErasedRule
    refuse: ErasedRefuse


def api(request: type[R], handler: Callable[[Request[R]], None], *,
        authorize: Callable[[RequestChecks, Request[R], Callable[[Request[R], int], Data]], bool],
        refuse: Callable[[Request[R], int], Data], versions: tuple[int, int] | None = None) -> ApiEntry:
    """One entry. The handler, the rule and the refusal are typed for this API's request; the
    router hands each of them requests of this API only, decoded with its codec, which is what
    makes the erased forms it keeps them in sound."""
    assert request.api_key is not None
    lo, hi = versions or (request.valid.low, request.valid.high)
    return ApiEntry(request.api_key, ApiKey(request.api_key).name, request, RESPONSES[request.api_key], (lo, hi),
                    cast(Handler, handler), cast(ErasedRule, authorize), cast(ErasedRefuse, refuse))


@dataclass(frozen=True)
class Handlers:
    """The objects that serve the APIs, each over the services it needs (built by broker/app.py)."""

    api_versions: ApiVersionsApi
    cluster: ClusterApis
    topics: TopicApis
    create_partitions: CreatePartitionsApi
    groups: GroupApis
    streams_groups: StreamsGroupApis
    produce: ProduceApi
    fetch: FetchApi
    share: ShareApis
    list_offsets: ListOffsetsApi
    records: RecordApis
    log_dirs: LogDirApis
    transactions: TransactionApis
    sasl: SaslApis
    scram: ScramCredentialApis
    tokens: DelegationTokenApis
    acls: AclApis
    topology: TopologyApis
    configs: ConfigApis
    # Client quotas and client telemetry (KIP-714).
    client_quotas: ClientQuotaApis | None = None
    telemetry: TelemetryApis | None = None
    # Only in a cluster: the markers another node's transaction coordinator has this node write.
    write_txn_markers: WriteTxnMarkersApi | None = None
    # Share partitions (ShareFetch, ShareAcknowledge, the share-group offsets): one node only.
    share_offsets: ShareOffsetApis | None = None
    # The share coordinator's APIs between the nodes of a cluster.
    share_state: ShareStateApis | None = None


def api_table(h: Handlers) -> tuple[ApiEntry, ...]:
    """Every API served: one entry each."""
    checks = RequestChecks
    g, t = h.groups, h.transactions
    return (
        # ---- what a client asks first ----------------------------------------------------------
        api(ApiVersionsRequest, h.api_versions, authorize=OPEN_TO_ALL,
            refuse=refusals.api_versions),
        api(MetadataRequest, h.cluster.metadata, authorize=checks.metadata,
            refuse=refusals.metadata),
        api(DescribeClusterRequest, h.cluster.describe_cluster,
            authorize=checks.describe_cluster, refuse=refusals.describe_cluster),
        api(FindCoordinatorRequest, h.cluster.find_coordinator,
            authorize=checks.find_coordinator, refuse=refusals.find_coordinator),
        # Alter on the cluster, as Kafka's controller checks it.
        api(UnregisterBrokerRequest, h.cluster.unregister_broker,
            authorize=checks.cluster_alter, refuse=refusals.unregister_broker),
        # ---- topics ----------------------------------------------------------------------------
        api(CreateTopicsRequest, h.topics.create_topics, authorize=checks.create_topics,
            refuse=refusals.create_topics),
        api(DeleteTopicsRequest, h.topics.delete_topics, authorize=checks.delete_topics,
            refuse=refusals.delete_topics),
        api(CreatePartitionsRequest, h.create_partitions.create_partitions,
            authorize=checks.create_partitions, refuse=refusals.create_partitions),
        # ---- groups and offsets ----------------------------------------------------------------
        api(JoinGroupRequest, g.join_group, authorize=checks.group_read, refuse=join_error),
        api(SyncGroupRequest, g.sync_group, authorize=checks.group_read, refuse=sync_error),
        api(HeartbeatRequest, g.heartbeat, authorize=checks.group_read, refuse=heartbeat_error),
        api(LeaveGroupRequest, g.leave_group, authorize=checks.group_read, refuse=leave_error),
        # v10 names topics by id (KIP-848 consumers).
        api(OffsetCommitRequest, g.offset_commit, authorize=checks.offset_commit,
            refuse=commit_error),
        api(OffsetFetchRequest, g.offset_fetch, authorize=checks.offset_fetch,
            refuse=offset_fetch_error),
        api(OffsetDeleteRequest, g.offset_delete, authorize=checks.offset_delete,
            refuse=delete_offsets_error),
        api(TxnOffsetCommitRequest, g.txn_offset_commit,
            authorize=checks.txn_offset_commit, refuse=txn_commit_error),
        api(DescribeGroupsRequest, g.describe_groups, authorize=checks.describe_groups,
            refuse=describe_groups_error),
        api(ListGroupsRequest, g.list_groups, authorize=checks.list_groups,
            refuse=list_groups_error),
        api(DeleteGroupsRequest, g.delete_groups, authorize=checks.delete_groups,
            refuse=delete_groups_error),
        api(ConsumerGroupHeartbeatRequest, g.consumer_group_heartbeat,
            authorize=checks.consumer_group_heartbeat, refuse=consumer_heartbeat_error),
        api(ConsumerGroupDescribeRequest, g.consumer_group_describe,
            authorize=checks.consumer_group_describe, refuse=consumer_describe_error),
        api(StreamsGroupHeartbeatRequest, h.streams_groups.streams_group_heartbeat,
            authorize=checks.streams_group_heartbeat, refuse=streams_heartbeat_error),
        api(StreamsGroupDescribeRequest, h.streams_groups.streams_group_describe,
            authorize=checks.streams_group_describe, refuse=streams_describe_error),
        # KIP-1331: Read on the group, as Kafka checks it (a push does not modify the group).
        api(StreamsGroupTopologyDescriptionUpdateRequest,
            h.streams_groups.streams_group_topology_description_update,
            authorize=checks.group_read, refuse=streams_topology_description_update_error),
        # ---- share groups (KIP-932) --------------------------------------------------------------
        api(ShareGroupHeartbeatRequest, h.share.share_group_heartbeat,
            authorize=checks.share_group_heartbeat, refuse=share_heartbeat_error),
        api(ShareGroupDescribeRequest, h.share.share_group_describe,
            authorize=checks.share_group_describe, refuse=share_describe_error),
        # ---- the data plane --------------------------------------------------------------------
        api(ProduceRequest, h.produce.produce, authorize=checks.produce, refuse=refusals.produce),
        api(FetchRequest, h.fetch.fetch, authorize=checks.fetch, refuse=refusals.fetch),
        api(ListOffsetsRequest, h.list_offsets.list_offsets, authorize=checks.list_offsets,
            refuse=refusals.list_offsets),
        # ---- records and log directories (Kafka 4.4's versions) ----------------------------------
        api(DeleteRecordsRequest, h.records.delete_records, authorize=checks.delete_records,
            refuse=refusals.delete_records, versions=(0, 2)),
        api(OffsetForLeaderEpochRequest, h.records.offset_for_leader_epoch,
            authorize=checks.offset_for_leader_epoch, refuse=refusals.offset_for_leader_epoch, versions=(2, 4)),
        api(DescribeProducersRequest, h.records.describe_producers,
            authorize=checks.describe_producers, refuse=refusals.describe_producers),
        api(DescribeLogDirsRequest, h.log_dirs.describe_log_dirs,
            authorize=checks.cluster_describe, refuse=refusals.describe_log_dirs, versions=(1, 5)),
        api(AlterReplicaLogDirsRequest, h.log_dirs.alter_replica_log_dirs,
            authorize=checks.cluster_alter, refuse=refusals.alter_replica_log_dirs, versions=(1, 2)),
        # ---- transactions ----------------------------------------------------------------------
        api(InitProducerIdRequest, t.init_producer_id, authorize=checks.init_producer_id,
            refuse=refusals.init_producer_id, versions=(0, t.init_producer_id_max_version)),
        api(AddPartitionsToTxnRequest, t.add_partitions,
            authorize=checks.add_partitions_to_txn, refuse=refusals.add_partitions_to_txn,
            versions=(0, ADD_PARTITIONS_MAX_VERSION)),
        api(AddOffsetsToTxnRequest, t.add_offsets, authorize=checks.add_offsets_to_txn,
            refuse=refusals.add_offsets_to_txn),
        api(EndTxnRequest, t.end_txn, authorize=checks.transactional_write,
            refuse=refusals.end_txn, versions=(0, END_TXN_MAX_VERSION)),
        # ListTransactions v2's pattern is a Java regular expression; Python's agrees on the common forms.
        api(DescribeTransactionsRequest, t.describe_transactions,
            authorize=checks.describe_transactions, refuse=refusals.describe_transactions),
        api(ListTransactionsRequest, t.list_transactions,
            authorize=checks.list_transactions, refuse=refusals.list_transactions),
        # ---- security --------------------------------------------------------------------------
        api(SaslHandshakeRequest, h.sasl.handshake, authorize=OPEN_TO_ALL,
            refuse=refusals.sasl_handshake),
        api(SaslAuthenticateRequest, h.sasl.authenticate, authorize=OPEN_TO_ALL,
            refuse=refusals.sasl_authenticate),
        api(DescribeUserScramCredentialsRequest, h.scram.describe,
            authorize=checks.cluster_describe, refuse=refusals.describe_user_scram_credentials),
        api(AlterUserScramCredentialsRequest, h.scram.alter,
            authorize=checks.cluster_alter, refuse=refusals.alter_user_scram_credentials),
        # Delegation tokens: the handler authorizes, per owner and per token, as KafkaApis does.
        api(CreateDelegationTokenRequest, h.tokens.create, authorize=OPEN_TO_ALL,
            refuse=refusals.create_delegation_token),
        api(RenewDelegationTokenRequest, h.tokens.renew, authorize=OPEN_TO_ALL,
            refuse=refusals.renew_delegation_token),
        api(ExpireDelegationTokenRequest, h.tokens.expire, authorize=OPEN_TO_ALL,
            refuse=refusals.expire_delegation_token),
        api(DescribeDelegationTokenRequest, h.tokens.describe, authorize=OPEN_TO_ALL,
            refuse=refusals.describe_delegation_token),
        api(DescribeAclsRequest, h.acls.describe, authorize=checks.cluster_describe,
            refuse=refusals.describe_acls),
        api(CreateAclsRequest, h.acls.create, authorize=checks.cluster_alter,
            refuse=refusals.create_acls),
        api(DeleteAclsRequest, h.acls.delete, authorize=checks.cluster_alter,
            refuse=refusals.delete_acls),
        # ---- topology and features (broker/handlers/topology.py) -------------------------------
        api(DescribeTopicPartitionsRequest, h.topology.describe_topic_partitions,
            authorize=checks.describe_topic_partitions, refuse=refusals.describe_topic_partitions),
        api(ElectLeadersRequest, h.topology.elect_leaders, authorize=checks.cluster_alter,
            refuse=refusals.elect_leaders),
        api(AlterPartitionReassignmentsRequest, h.topology.alter_partition_reassignments, authorize=checks.cluster_alter,
            refuse=refusals.alter_partition_reassignments),
        api(ListPartitionReassignmentsRequest, h.topology.list_partition_reassignments, authorize=checks.cluster_describe,
            refuse=refusals.list_partition_reassignments),
        api(DescribeQuorumRequest, h.topology.describe_quorum,
            authorize=checks.cluster_describe, refuse=refusals.describe_quorum),
        api(UpdateFeaturesRequest, h.topology.update_features,
            authorize=checks.cluster_alter, refuse=refusals.update_features),
        # ---- configs ---------------------------------------------------------------------------
        api(DescribeConfigsRequest, h.configs.describe_configs,
            authorize=checks.describe_configs, refuse=refusals.describe_configs),
        api(AlterConfigsRequest, h.configs.alter_configs, authorize=checks.alter_configs,
            refuse=refusals.alter_configs),
        api(IncrementalAlterConfigsRequest, h.configs.incremental_alter_configs,
            authorize=checks.incremental_alter_configs, refuse=refusals.incremental_alter_configs),
        api(ListConfigResourcesRequest, h.configs.list_config_resources,
            authorize=checks.list_config_resources, refuse=refusals.list_config_resources),
    ) + _quota_and_telemetry_apis(h) + (
        # ---- share partitions, on the node leading their topic partition -----------------------
        api(ShareFetchRequest, h.share.share_fetch, authorize=checks.share_fetch,
            refuse=share_fetch_error),
        api(ShareAcknowledgeRequest, h.share.share_acknowledge,
            authorize=checks.share_acknowledge, refuse=share_acknowledge_error),
    ) + (() if h.share_offsets is None else (
        api(DescribeShareGroupOffsetsRequest, h.share_offsets.describe_share_group_offsets, authorize=checks.describe_share_group_offsets,
            refuse=describe_share_offsets_error),
        api(AlterShareGroupOffsetsRequest, h.share_offsets.alter_share_group_offsets,
            authorize=checks.alter_share_group_offsets, refuse=alter_share_offsets_error),
        api(DeleteShareGroupOffsetsRequest, h.share_offsets.delete_share_group_offsets, authorize=checks.delete_share_group_offsets,
            refuse=delete_share_offsets_error),
    )) + (() if h.write_txn_markers is None else (
        # ---- between the nodes of a cluster ----------------------------------------------------
        api(WriteTxnMarkersRequest, h.write_txn_markers, authorize=checks.cluster_peer,
            refuse=write_txn_markers_refused, versions=(1, 2)),
    )) + (() if h.share_state is None else (
        # ---- share partitions' state, from their leader to the share coordinator ----------------
        api(InitializeShareGroupStateRequest, h.share_state.initialize,
            authorize=checks.cluster_peer, refuse=share_state.INITIALIZE.refuse, versions=(0, 0)),
        api(ReadShareGroupStateRequest, h.share_state.read,
            authorize=checks.cluster_peer, refuse=share_state.READ.refuse, versions=(0, 0)),
        api(WriteShareGroupStateRequest, h.share_state.write,
            authorize=checks.cluster_peer, refuse=share_state.WRITE.refuse, versions=(0, 1)),
        api(DeleteShareGroupStateRequest, h.share_state.delete,
            authorize=checks.cluster_peer, refuse=share_state.DELETE.refuse, versions=(0, 0)),
        api(ReadShareGroupStateSummaryRequest, h.share_state.read_summary,
            authorize=checks.cluster_peer, refuse=share_state.SUMMARY.refuse, versions=(0, 1)),
    ))


def _quota_and_telemetry_apis(h: Handlers) -> tuple[ApiEntry, ...]:
    """Client quotas (DESCRIBE_CONFIGS and ALTER_CONFIGS on the cluster, as Kafka checks them) and
    client telemetry (open to every client, as in Kafka)."""
    checks = RequestChecks
    entries: tuple[ApiEntry, ...] = ()
    if h.client_quotas is not None:
        entries += (
            api(DescribeClientQuotasRequest, h.client_quotas.describe,
                authorize=checks.client_quotas_describe, refuse=refusals.describe_client_quotas),
            api(AlterClientQuotasRequest, h.client_quotas.alter,
                authorize=checks.client_quotas_alter, refuse=refusals.alter_client_quotas),
        )
    if h.telemetry is not None:
        entries += (
            api(GetTelemetrySubscriptionsRequest, h.telemetry.get_subscriptions,
                authorize=OPEN_TO_ALL, refuse=refusals.get_telemetry_subscriptions),
            api(PushTelemetryRequest, h.telemetry.push, authorize=OPEN_TO_ALL,
                refuse=refusals.push_telemetry),
        )
    return entries


def router_apis(table: tuple[ApiEntry, ...], checks: RequestChecks | None) -> list[Api]:
    """What the router keeps of the table: with the authorizer on (``checks``), each API's rule
    bound to the checks and to how the API refuses, once, not per request."""
    return [Api(e.key, e.request, e.response, e.versions[0], e.versions[1], e.handler, e.name,
                _bind(e, checks)) for e in table]


def _bind(entry: ApiEntry, checks: RequestChecks | None) -> Authorize | None:
    if checks is None or entry.authorize is OPEN_TO_ALL:
        return None
    rule, refuse = entry.authorize, entry.refuse

    def authorize(req: Request[Data]) -> bool:
        return rule(checks, req, refuse)

    return authorize
