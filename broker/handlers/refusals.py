"""How each API outside the group coordinator answers a request refused or failed as a whole
with one error code: every part of the request gets the code (the group APIs' answers are in
``broker.handlers.groups``). Each API's entry in the table (broker/apis.py) names its answer; the
authorizer answers a denied request with it."""

from __future__ import annotations

from broker.handlers import topology
from broker.network.router import Request
from protocol.errors import ErrorCode
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from protocol.messages.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from protocol.messages.create_delegation_token import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
)
from protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from protocol.messages.describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from protocol.messages.describe_delegation_token import (
    DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse,
)
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from protocol.messages.describe_producers import DescribeProducersRequest, DescribeProducersResponse
from protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
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
from protocol.messages.expire_delegation_token import (
    ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse,
)
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.get_telemetry_subscriptions import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)
from protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.list_config_resources import ListConfigResourcesRequest, ListConfigResourcesResponse
from protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.messages.push_telemetry import PushTelemetryRequest, PushTelemetryResponse
from protocol.messages.renew_delegation_token import RenewDelegationTokenRequest, RenewDelegationTokenResponse
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from protocol.messages.unregister_broker import UnregisterBrokerRequest, UnregisterBrokerResponse
from protocol.messages.update_features import UpdateFeaturesRequest, UpdateFeaturesResponse

_CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def api_versions(req: Request[ApiVersionsRequest], code: int) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=code, api_keys=[])


def unregister_broker(req: Request[UnregisterBrokerRequest], code: int) -> UnregisterBrokerResponse:
    # Kafka's controller answers with the message of the exception that refused it.
    return UnregisterBrokerResponse(
        error_code=code, error_message="Cluster authorization failed." if code == _CLUSTER_DENIED else None)


def metadata(req: Request[MetadataRequest], code: int) -> MetadataResponse:
    return MetadataResponse(topics=[MetadataResponse.Topic(error_code=code, name=t.name, topic_id=t.topic_id,
                                                           partitions=[]) for t in req.body.topics or []])


def describe_cluster(req: Request[DescribeClusterRequest], code: int) -> DescribeClusterResponse:
    return DescribeClusterResponse(error_code=code, error_message=None, brokers=[])


def find_coordinator(req: Request[FindCoordinatorRequest], code: int) -> FindCoordinatorResponse:
    if req.version < 4:
        return FindCoordinatorResponse(error_code=code, error_message=None, node_id=-1, host="", port=-1)
    return FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
        key=k, node_id=-1, host="", port=-1, error_code=code, error_message=None)
        for k in req.body.coordinator_keys])


def describe_configs(req: Request[DescribeConfigsRequest], code: int) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(results=[DescribeConfigsResponse.Result(
        error_code=code, error_message=None, resource_type=r.resource_type, resource_name=r.resource_name,
        configs=[]) for r in req.body.resources])


def create_topics(req: Request[CreateTopicsRequest], code: int) -> CreateTopicsResponse:
    return CreateTopicsResponse(topics=[CreateTopicsResponse.CreatableTopicResult(name=t.name, error_code=code)
                                        for t in req.body.topics])


def delete_topics(req: Request[DeleteTopicsRequest], code: int) -> DeleteTopicsResponse:
    R = DeleteTopicsResponse.DeletableTopicResult
    if req.version < 6:
        return DeleteTopicsResponse(responses=[R(name=n, error_code=code) for n in req.body.topic_names])
    return DeleteTopicsResponse(responses=[R(name=t.name, topic_id=t.topic_id, error_code=code)
                                           for t in req.body.topics])


def create_partitions(req: Request[CreatePartitionsRequest], code: int) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(results=[CreatePartitionsResponse.TopicResult(name=t.name, error_code=code)
                                             for t in req.body.topics])


def produce(req: Request[ProduceRequest], code: int) -> ProduceResponse:
    R = ProduceResponse.TopicProduceResponse
    return ProduceResponse(responses=[R(name=t.name, topic_id=t.topic_id, partition_responses=[
        R.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1) for p in t.partition_data])
        for t in req.body.topic_data])


def fetch(req: Request[FetchRequest], code: int) -> FetchResponse:
    T = FetchResponse.FetchableTopicResponse
    return FetchResponse(responses=[T(topic=t.topic, topic_id=t.topic_id, partitions=[
        T.PartitionData(partition_index=p.partition, error_code=code, high_watermark=-1, records=None)
        for p in t.partitions]) for t in req.body.topics])


def list_offsets(req: Request[ListOffsetsRequest], code: int) -> ListOffsetsResponse:
    T = ListOffsetsResponse.Topic
    return ListOffsetsResponse(topics=[T(name=t.name, partitions=[
        T.Partition(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in req.body.topics])


def init_producer_id(req: Request[InitProducerIdRequest], code: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)


def add_partitions_to_txn(req: Request[AddPartitionsToTxnRequest], code: int) -> AddPartitionsToTxnResponse:
    if req.version >= 4:
        return AddPartitionsToTxnResponse(error_code=code, results_by_transaction=[])
    T = AddPartitionsToTxnResponse.TopicResult
    return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[T(name=t.name, results_by_partition=[
        T.PartitionResult(partition_index=p, partition_error_code=code) for p in t.partitions])
        for t in req.body.v3_and_below_topics])


def add_offsets_to_txn(req: Request[AddOffsetsToTxnRequest], code: int) -> AddOffsetsToTxnResponse:
    return AddOffsetsToTxnResponse(error_code=code)


def end_txn(req: Request[EndTxnRequest], code: int) -> EndTxnResponse:
    return EndTxnResponse(error_code=code)


def describe_transactions(req: Request[DescribeTransactionsRequest], code: int) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(transaction_states=[DescribeTransactionsResponse.TransactionState(
        error_code=code, transactional_id=i, transaction_state="", transaction_timeout_ms=0,
        transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[])
        for i in req.body.transactional_ids])


def list_transactions(req: Request[ListTransactionsRequest], code: int) -> ListTransactionsResponse:
    return ListTransactionsResponse(error_code=code, unknown_state_filters=[], transaction_states=[])


def sasl_handshake(req: Request[SaslHandshakeRequest], code: int) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=code, mechanisms=[])


def sasl_authenticate(req: Request[SaslAuthenticateRequest], code: int) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=code, error_message=None)


def describe_acls(req: Request[DescribeAclsRequest], code: int) -> DescribeAclsResponse:
    message = "Cluster authorization failed" if code == _CLUSTER_DENIED else None
    return DescribeAclsResponse(error_code=code, error_message=message, resources=[])


def create_acls(req: Request[CreateAclsRequest], code: int) -> CreateAclsResponse:
    return CreateAclsResponse(results=[CreateAclsResponse.AclCreationResult(error_code=code, error_message=None)
                                       for _ in req.body.creations])


def delete_acls(req: Request[DeleteAclsRequest], code: int) -> DeleteAclsResponse:
    return DeleteAclsResponse(filter_results=[DeleteAclsResponse.FilterResult(
        error_code=code, error_message=None, matching_acls=[]) for _ in req.body.filters])


def describe_user_scram_credentials(req: Request[DescribeUserScramCredentialsRequest],
                                    code: int) -> DescribeUserScramCredentialsResponse:
    return DescribeUserScramCredentialsResponse(error_code=code, error_message=None, results=[])


def alter_user_scram_credentials(req: Request[AlterUserScramCredentialsRequest],
                                 code: int) -> AlterUserScramCredentialsResponse:
    body = req.body
    users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
    return AlterUserScramCredentialsResponse(results=[AlterUserScramCredentialsResponse.Result(
        user=u, error_code=code, error_message=None) for u in users])


# ---- topology and features (broker/handlers/topology.py) -----------------------------------------

def describe_topic_partitions(req: Request[DescribeTopicPartitionsRequest],
                              code: int) -> DescribeTopicPartitionsResponse:
    return topology.describe_topic_partitions_error(req.body, code)


def elect_leaders(req: Request[ElectLeadersRequest], code: int) -> ElectLeadersResponse:
    return topology.elect_leaders_error(req, code, None)


def alter_partition_reassignments(req: Request[AlterPartitionReassignmentsRequest],
                                  code: int) -> AlterPartitionReassignmentsResponse:
    return topology.alter_partition_reassignments_error(req, code)


def list_partition_reassignments(req: Request[ListPartitionReassignmentsRequest],
                                 code: int) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(error_code=code, error_message=None, topics=[])


def describe_quorum(req: Request[DescribeQuorumRequest], code: int) -> DescribeQuorumResponse:
    return DescribeQuorumResponse(error_code=code, error_message=None, topics=[], nodes=[])


def update_features(req: Request[UpdateFeaturesRequest], code: int) -> UpdateFeaturesResponse:
    Result = UpdateFeaturesResponse.UpdatableFeatureResult
    return UpdateFeaturesResponse(error_code=code, error_message=None, results=[
        Result(feature=u.feature, error_code=code, error_message=None) for u in req.body.feature_updates]
        if req.version < 2 else [])


# ---- client quotas and client telemetry --------------------------------------------------------

def describe_client_quotas(req: Request[DescribeClientQuotasRequest], code: int) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(error_code=code, error_message=None, entries=None)


def alter_client_quotas(req: Request[AlterClientQuotasRequest], code: int) -> AlterClientQuotasResponse:
    Entry = AlterClientQuotasResponse.EntryData
    return AlterClientQuotasResponse(entries=[Entry(
        error_code=code, error_message=None,
        entity=[Entry.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in req.body.entries])


def get_telemetry_subscriptions(req: Request[GetTelemetrySubscriptionsRequest],
                                code: int) -> GetTelemetrySubscriptionsResponse:
    return GetTelemetrySubscriptionsResponse(error_code=code, client_instance_id=req.body.client_instance_id,
                                             accepted_compression_types=[], requested_metrics=[])


def push_telemetry(req: Request[PushTelemetryRequest], code: int) -> PushTelemetryResponse:
    return PushTelemetryResponse(error_code=code)


# ---- records and log directories -------------------------------------------------------------------

def delete_records(req: Request[DeleteRecordsRequest], code: int) -> DeleteRecordsResponse:
    T = DeleteRecordsResponse.TopicResult
    return DeleteRecordsResponse(throttle_time_ms=0, topics=[T(name=t.name, partitions=[
        T.PartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=code)
        for p in t.partitions]) for t in req.body.topics])


def offset_for_leader_epoch(req: Request[OffsetForLeaderEpochRequest], code: int) -> OffsetForLeaderEpochResponse:
    T = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[T(topic=t.topic, partitions=[
        T.EpochEndOffset(error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1)
        for p in t.partitions]) for t in req.body.topics])


def describe_log_dirs(req: Request[DescribeLogDirsRequest], code: int) -> DescribeLogDirsResponse:
    # Before v3 the answer has no error code: a refused request gets no directories.
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=code, results=[])


def alter_replica_log_dirs(req: Request[AlterReplicaLogDirsRequest], code: int) -> AlterReplicaLogDirsResponse:
    R = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[R(topic_name=t.name, partitions=[
        R.AlterReplicaLogDirPartitionResult(partition_index=p, error_code=code) for p in t.partitions])
        for d in req.body.dirs for t in d.topics])


def describe_producers(req: Request[DescribeProducersRequest], code: int) -> DescribeProducersResponse:
    T = DescribeProducersResponse.TopicResponse
    return DescribeProducersResponse(throttle_time_ms=0, topics=[T(name=t.name, partitions=[
        T.PartitionResponse(partition_index=i, error_code=code, error_message=None, active_producers=[])
        for i in t.partition_indexes]) for t in req.body.topics])
# ---- configs ----------------------------------------------------------------------------------


def alter_configs(req: Request[AlterConfigsRequest], code: int) -> AlterConfigsResponse:
    return AlterConfigsResponse(responses=[AlterConfigsResponse.ResourceResponse(
        error_code=code, error_message=None, resource_type=r.resource_type, resource_name=r.resource_name)
        for r in req.body.resources])


def incremental_alter_configs(req: Request[IncrementalAlterConfigsRequest],
                              code: int) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(responses=[IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
        error_code=code, error_message=None, resource_type=r.resource_type, resource_name=r.resource_name)
        for r in req.body.resources])


def list_config_resources(req: Request[ListConfigResourcesRequest], code: int) -> ListConfigResourcesResponse:
    return ListConfigResourcesResponse(error_code=code, config_resources=[])


def create_delegation_token(req: Request[CreateDelegationTokenRequest], code: int) -> CreateDelegationTokenResponse:
    return CreateDelegationTokenResponse(error_code=code, principal_type="", principal_name="",
                                         token_requester_principal_type="", token_requester_principal_name="",
                                         issue_timestamp_ms=-1, expiry_timestamp_ms=-1, max_timestamp_ms=-1,
                                         token_id="", hmac=b"")


def renew_delegation_token(req: Request[RenewDelegationTokenRequest], code: int) -> RenewDelegationTokenResponse:
    return RenewDelegationTokenResponse(error_code=code, expiry_timestamp_ms=-1)


def expire_delegation_token(req: Request[ExpireDelegationTokenRequest], code: int) -> ExpireDelegationTokenResponse:
    return ExpireDelegationTokenResponse(error_code=code, expiry_timestamp_ms=-1)


def describe_delegation_token(req: Request[DescribeDelegationTokenRequest],
                              code: int) -> DescribeDelegationTokenResponse:
    return DescribeDelegationTokenResponse(error_code=code, tokens=[])
