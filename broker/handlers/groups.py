"""Group and offset APIs: the service layer in front of the shards (Kafka's GroupCoordinatorService).

It does the cheap checks Kafka does before routing (group id, loading), picks the shard with
``partition_for``, runs the operation there, and fans multi-group requests out and back in.
Reads (OffsetFetch, DescribeGroups, ListGroups) are answered only once every write they could see
is durable (``ShardManager.after_durable``), never from records a crash could still take away.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from broker.coordinator.consumer.heartbeat import error_response as consumer_heartbeat_error
from broker.coordinator.context import RequestContext
from broker.coordinator.partitioning import partition_for
from broker.coordinator.result import Result
from broker.coordinator.shard import GroupCoordinatorShard
from broker.groups.shards import ShardRuntime
from broker.network.router import Request
from broker.security.acl_model import ResourceType, all_operations
from broker.topics.catalog import OFFSETS_TOPIC
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse

if TYPE_CHECKING:
    from broker.server import Broker

_NOT_REQUESTED = -2147483648
_SHARD_CACHE_SIZE = 100_000


# ---- error responses (loading, write failures) ------------------------------------------------

def join_error(req: Request, code: int) -> Any:
    return JoinGroupResponse(error_code=code, generation_id=-1, protocol_type=None,
                             protocol_name=None if req.version >= 7 else "", leader="",
                             member_id=req.body.member_id, members=[])


def commit_error(req: Request, code: int) -> Any:
    return OffsetCommitResponse(topics=[
        OffsetCommitResponse.Topic(name=t.name, topic_id=t.topic_id, partitions=[
            OffsetCommitResponse.Topic.Partition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in req.body.topics])


def txn_commit_error(req: Request, code: int) -> Any:
    return TxnOffsetCommitResponse(topics=[
        TxnOffsetCommitResponse.Topic(name=t.name, partitions=[
            TxnOffsetCommitResponse.Topic.Partition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in req.body.topics])


def leave_error(req: Request, code: int) -> Any:
    return LeaveGroupResponse(error_code=code, members=[])


def delete_offsets_error(req: Request, code: int) -> Any:
    return OffsetDeleteResponse(error_code=code, topics=[])


def describe_error(group_id: str, code: int) -> Any:
    return DescribeGroupsResponse.DescribedGroup(error_code=code, group_id=group_id, group_state="", protocol_type="",
                                                 protocol_data="", authorized_operations=_NOT_REQUESTED)


def respond_offsets(req: Request, wanted: list[tuple[str, list[tuple[str, list[int]]] | None]],
                    groups: list[tuple[str, int, list[Any]]]) -> None:
    """Builds the OffsetFetch response of ``req`` (either layout) from each group's error and rows
    ``(topic, partition, offset, leader epoch, metadata, error)``."""
    filled = []
    for (group_id, code, rows), (_, topics) in zip(groups, wanted):
        if code and req.version >= 8:
            rows = []  # as Kafka: a group refused whole is answered with its error alone
        elif code and topics is not None:
            rows = [(t, p, -1, -1, "", code if req.version < 2 else 0) for t, ps in topics for p in ps]
        filled.append((group_id, code, rows))
    if req.version >= 8:
        out = []
        for group_id, code, rows in filled:
            by_topic: dict[str, list[Any]] = {}
            for topic, part, offset, epoch, meta, err in rows:
                by_topic.setdefault(topic, []).append(OffsetFetchResponse.Group.Topics.Partitions(
                    partition_index=part, committed_offset=offset, committed_leader_epoch=epoch,
                    metadata=meta, error_code=err))
            out.append(OffsetFetchResponse.Group(group_id=group_id, error_code=code, topics=[
                OffsetFetchResponse.Group.Topics(name=t, partitions=ps) for t, ps in by_topic.items()]))
        req.reply.set(OffsetFetchResponse(groups=out))
        return
    _group_id, code, rows = filled[0]
    by_topic = {}
    for topic, part, offset, epoch, meta, err in rows:
        by_topic.setdefault(topic, []).append(OffsetFetchResponse.Topic.Partition(
            partition_index=part, committed_offset=offset, committed_leader_epoch=epoch,
            metadata=meta, error_code=err))
    req.reply.set(OffsetFetchResponse(
        error_code=code if req.version >= 2 else 0,
        topics=[OffsetFetchResponse.Topic(name=t, partitions=ps) for t, ps in by_topic.items()]))


_ERRORS: dict[Any, Callable[[Request, int], Any]] = {
    JoinGroupRequest: join_error,
    SyncGroupRequest: lambda req, code: SyncGroupResponse(error_code=code, assignment=b""),
    HeartbeatRequest: lambda req, code: HeartbeatResponse(error_code=code),
    LeaveGroupRequest: leave_error,
    OffsetCommitRequest: commit_error,
    TxnOffsetCommitRequest: txn_commit_error,
    OffsetDeleteRequest: delete_offsets_error,
    ConsumerGroupHeartbeatRequest: lambda req, code: consumer_heartbeat_error(code),
}


def register(broker: Broker) -> None:
    shards = broker.shards
    router = broker.router

    shard_of: dict[str, ShardRuntime] = {}

    def runtime_for(group_id: str) -> ShardRuntime:
        # Every group request hashes its group id; remember the answer for the groups we see.
        runtime = shard_of.get(group_id)
        if runtime is None:
            if len(shard_of) >= _SHARD_CACHE_SIZE:
                shard_of.clear()
            runtime = shard_of[group_id] = shards.runtimes[partition_for(group_id, shards.num_partitions)]
        return runtime

    max_record_bytes = broker.config["message.max.bytes"]
    authorizer = broker.security.authorizer

    def single_group(request_message: Any, op_name: str, empty_id_invalid: bool = True,
                     loading_code: int = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                     too_large: Callable[[Any], bool] | None = None,
                     refused: Callable[[Request], int] | None = None) -> Callable[[Request], None]:
        build_error = _ERRORS[request_message]

        def handle(req: Request) -> None:
            if refused is not None and (code := refused(req)):
                req.reply.set(build_error(req, code))
                return
            group_id = req.body.group_id
            if group_id is None or (empty_id_invalid and group_id == ""):
                req.reply.set(build_error(req, ErrorCode.INVALID_GROUP_ID))
                return
            if too_large is not None and too_large(req.body):
                # Kafka cannot write a record above the topic's max.message.bytes and answers the
                # MESSAGE_TOO_LARGE of its log as UNKNOWN_SERVER_ERROR; the group is left as it was.
                req.reply.set(build_error(req, ErrorCode.UNKNOWN_SERVER_ERROR))
                return
            runtime = runtime_for(group_id)
            if not runtime.serving:
                # Another node owns the group's partition (cluster mode): the client asks
                # FindCoordinator again and follows the answer.
                req.reply.set(build_error(req, ErrorCode.NOT_COORDINATOR))
                return
            if not runtime.loaded:
                req.reply.set(build_error(req, loading_code))
                return
            body = req.body

            def op(shard: Any, ctx: Any, now: int) -> Result:
                return getattr(shard, op_name)(body, ctx, now)

            # The sender's Describe right on topics: a consumer group's regular expressions that its
            # request resolves leave out the topics it may not describe.
            may_describe = (None if authorizer is None
                            else authorizer.describable_topics(req.conn.principal, req.conn.client_host))
            # Kafka records the client's address as InetAddress.toString() does: "/127.0.0.1".
            runtime.execute(op, req.reply.set, (req.version, req.header.client_id, "/" + req.conn.client_host),
                            lambda code: build_error(req, code), group_id, may_describe)

        return handle

    def offset_fetch(req: Request) -> None:
        body = req.body
        members: dict[str, tuple[str | None, int]] = {}
        if req.version >= 8:
            wanted = [(g.group_id, None if g.topics is None else
                       [(t.name, list(t.partition_indexes)) for t in g.topics]) for g in body.groups]
            if req.version >= 9:
                # KIP-848 members name themselves and their epoch (checked for consumer groups).
                members = {g.group_id: (g.member_id, g.member_epoch) for g in body.groups}
        else:
            wanted = [(body.group_id, None if body.topics is None else
                       [(t.name, list(t.partition_indexes)) for t in body.topics])]
        groups: list[tuple[str, int, list[Any]]] = []
        read_from: list[tuple[ShardRuntime, str | None]] = []
        for group_id, topics in wanted:
            runtime = runtime_for(group_id)
            code: int
            rows: list[Any]
            if not runtime.serving:
                code, rows = ErrorCode.NOT_COORDINATOR, []
            elif not runtime.loaded:
                code, rows = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
            else:
                member_id, member_epoch = members.get(group_id, (None, -1))
                code, rows = runtime.shard.offset_fetch_group(group_id, topics, body.require_stable,
                                                              member_id, member_epoch)
                read_from.append((runtime, group_id))
            groups.append((group_id, code, rows))

        def answer(durable: bool) -> None:
            if not durable:
                # A write this read could see failed: the shard is rebuilding from its log.
                respond_offsets(req, wanted, [(g, ErrorCode.NOT_COORDINATOR, []) for g, _, _ in groups])
            else:
                respond_offsets(req, wanted, groups)

        shards.after_durable(read_from, answer)

    def describe_groups(req: Request) -> None:
        out = []
        read_from: list[tuple[ShardRuntime, str | None]] = []
        for group_id in req.body.groups:
            runtime = runtime_for(group_id)
            if not runtime.serving:
                out.append(describe_error(group_id, ErrorCode.NOT_COORDINATOR))
                continue
            if not runtime.loaded:
                out.append(describe_error(group_id, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
                continue
            out.append(runtime.shard.describe_group(group_id, req.version))
            read_from.append((runtime, group_id))

        def answer(durable: bool) -> None:
            groups = out if durable else [describe_error(g, ErrorCode.NOT_COORDINATOR) for g in req.body.groups]
            if req.version >= 3 and req.body.include_authorized_operations:
                # Without an authorizer Kafka reports every group operation (with one, the
                # request checks put the principal's own in their place).
                for group in groups:
                    if group.error_code == 0:
                        group.authorized_operations = all_operations(ResourceType.GROUP)
            req.reply.set(DescribeGroupsResponse(groups=groups))

        shards.after_durable(read_from, answer)

    def consumer_group_describe(req: Request) -> None:
        Described = ConsumerGroupDescribeResponse.DescribedGroup

        def failed(group_id: str, code: int) -> Any:
            return Described(error_code=code, error_message=None, group_id=group_id, group_state="", group_epoch=0,
                             assignment_epoch=0, assignor_name="", members=[])

        out = []
        read_from: list[tuple[ShardRuntime, str | None]] = []
        for group_id in req.body.group_ids:
            if not group_id:
                out.append(failed(group_id, ErrorCode.INVALID_GROUP_ID))
                continue
            runtime = runtime_for(group_id)
            if not runtime.serving:
                out.append(failed(group_id, ErrorCode.NOT_COORDINATOR))
                continue
            if not runtime.loaded:
                out.append(failed(group_id, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
                continue
            out.append(runtime.shard.consumer_group_describe(group_id))
            read_from.append((runtime, group_id))

        def answer(durable: bool) -> None:
            groups = out if durable else [failed(g, ErrorCode.NOT_COORDINATOR) for g in req.body.group_ids]
            if req.body.include_authorized_operations:
                for group in groups:
                    if group.error_code == 0:
                        group.authorized_operations = all_operations(ResourceType.GROUP)
            req.reply.set(ConsumerGroupDescribeResponse(groups=groups))

        shards.after_durable(read_from, answer)

    def list_groups(req: Request) -> None:
        if shards.loading:
            req.reply.set(ListGroupsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, groups=[]))
            return
        body = req.body
        states = {s.lower() for s in body.states_filter} if req.version >= 4 and body.states_filter else None
        types = {t.lower() for t in body.types_filter} if req.version >= 5 and body.types_filter else None
        groups = []
        # The groups this node coordinates (in a cluster, clients ask every node and merge).
        serving = shards.serving_runtimes()
        for runtime in serving:
            groups.extend(runtime.shard.list_groups(states, types))

        def answer(durable: bool) -> None:
            if durable:
                req.reply.set(ListGroupsResponse(error_code=0, groups=groups))
            else:
                req.reply.set(ListGroupsResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, groups=[]))

        shards.after_durable([(runtime, None) for runtime in serving], answer)

    def delete_groups(req: Request) -> None:
        names = list(req.body.groups_names)
        results: list[Any] = [None] * len(names)
        remaining = [len(names)]
        Deleted = DeleteGroupsResponse.DeletableGroupResult

        def done(index: int, result: DeleteGroupsResponse.DeletableGroupResult) -> None:
            results[index] = result
            remaining[0] -= 1
            if remaining[0] == 0:
                req.reply.set(DeleteGroupsResponse(results=results))

        if not names:
            req.reply.set(DeleteGroupsResponse(results=[]))
            return
        for index, group_id in enumerate(names):
            runtime = runtime_for(group_id)
            if not runtime.serving:
                done(index, Deleted(group_id=group_id, error_code=ErrorCode.NOT_COORDINATOR))
                continue
            if not runtime.loaded:
                done(index, Deleted(group_id=group_id, error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
                continue

            def op(shard: GroupCoordinatorShard, ctx: RequestContext, now: int, gid: str = group_id) -> Result:
                code, records = shard.delete_group(gid, now)
                return Result(replies=[(ctx.token, Deleted(group_id=gid, error_code=code))], records=records)

            def failed(code: int, gid: str = group_id) -> DeleteGroupsResponse.DeletableGroupResult:
                return Deleted(group_id=gid, error_code=code)

            runtime.execute(op, partial(done, index), (req.version, req.header.client_id, req.conn.client_host),
                            failed, group_id)

    router.register(JoinGroupRequest, JoinGroupResponse, single_group(JoinGroupRequest, "join_group"))
    def assignment_too_large(body: Any) -> bool:
        return sum(len(a.assignment) + len(a.member_id) for a in body.assignments) > max_record_bytes

    def sync_without_protocol(req: Request) -> int:
        # Mandatory from v5: Kafka refuses a SyncGroup without them before it looks at the group.
        if req.version >= 5 and (req.body.protocol_type is None or req.body.protocol_name is None):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    router.register(SyncGroupRequest, SyncGroupResponse,
                    single_group(SyncGroupRequest, "sync_group", too_large=assignment_too_large,
                                 refused=sync_without_protocol))
    # Heartbeats during a load answer NONE so that members are not kicked out by a failover.
    router.register(HeartbeatRequest, HeartbeatResponse,
                    single_group(HeartbeatRequest, "heartbeat", loading_code=ErrorCode.NONE))
    router.register(LeaveGroupRequest, LeaveGroupResponse, single_group(LeaveGroupRequest, "leave_group"))
    router.register(OffsetCommitRequest, OffsetCommitResponse,
                    single_group(OffsetCommitRequest, "offset_commit", empty_id_invalid=False), versions=(0, 9))
    router.register(OffsetDeleteRequest, OffsetDeleteResponse, single_group(OffsetDeleteRequest, "offset_delete"))
    verification = broker.config["transaction.partition.verification.enable"]
    offsets_partitions = broker.config["offsets.topic.num.partitions"]

    def txn_commit_unverified(req: Request) -> int:
        # KIP-890 (transaction.partition.verification.enable): Kafka writes a transactional offset
        # commit only once the transaction coordinator confirms that the group's offsets partition
        # is in the producer's ongoing transaction with that epoch; a fenced epoch is answered
        # INVALID_PRODUCER_EPOCH there.
        service = getattr(broker, "transactions", None)
        if not verification or broker.cluster is not None or service is None or not service.loaded:
            return ErrorCode.NONE
        body = req.body
        tp = (OFFSETS_TOPIC, partition_for(body.group_id, offsets_partitions))
        result = service.coordinator.add_partitions(body.transactional_id, body.producer_id, body.producer_epoch,
                                                    [tp], broker.clock(), verify_only=True)
        code = result.partition_errors.get(tp, result.error)
        return ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED else code

    router.register(TxnOffsetCommitRequest, TxnOffsetCommitResponse,
                    single_group(TxnOffsetCommitRequest, "txn_offset_commit", refused=txn_commit_unverified),
                    versions=(0, 4))
    router.register(OffsetFetchRequest, OffsetFetchResponse, offset_fetch, versions=(0, 9))
    router.register(DescribeGroupsRequest, DescribeGroupsResponse, describe_groups)
    router.register(ListGroupsRequest, ListGroupsResponse, list_groups)
    router.register(DeleteGroupsRequest, DeleteGroupsResponse, delete_groups)
    # KIP-848: the group id is validated by the operation (INVALID_REQUEST, as Kafka answers).
    router.register(ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
                    single_group(ConsumerGroupHeartbeatRequest, "consumer_group_heartbeat", empty_id_invalid=False))
    router.register(ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, consumer_group_describe)
