"""Group and offset APIs: the service layer in front of the shards (Kafka's GroupCoordinatorService).

It does the cheap checks Kafka does before routing (group id, loading), picks the shard with
``partition_for``, runs the operation there, and fans multi-group requests out and back in.
Reads (OffsetFetch, DescribeGroups, ListGroups) are answered only once every write they could see
is durable (``GroupCoordinatorService.after_durable``), never from records a crash could still take away.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Generic, Protocol, TypeVar

from broker.coordinators.group.core.base.context import RequestContext
from broker.coordinators.group.core.base.partitioning import partition_for
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.consumer_heartbeat import error_response as consumer_heartbeat_response
from broker.coordinators.group.core.shard import GroupCoordinatorShard
from broker.coordinators.group.service.coordinator import GroupCoordinatorService, GroupShardRuntime
from broker.coordinators.transaction.service.coordinator import TransactionCoordinatorService
from broker.coordinators.transaction.service.verification import PartitionAdder
from broker.network.router import Request
from broker.runtime.countdown import Countdown
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
from protocol.schema import Data

_NOT_REQUESTED = -2147483648
# TxnOffsetCommit v5 and up: the client speaks transactions version 2 (no AddOffsetsToTxn).
TXN_OFFSET_COMMIT_TV2_VERSION = 5
# How a failed add of the offsets partition is answered (Kafka: the add's errors as its partition
# leaders map them, then the group coordinator's handleOperationException).
_ADD_OFFSETS_ERRORS: dict[int, int] = {ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
                       ErrorCode.NOT_COORDINATOR: ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.COORDINATOR_NOT_AVAILABLE}
_ZERO_ID = bytes(16)
_SHARD_CACHE_SIZE = 100_000


class GroupRequest(Protocol):
    """A request about one group."""

    @property
    def group_id(self) -> str: ...


GroupBody = TypeVar("GroupBody", bound=GroupRequest)
GroupReply = TypeVar("GroupReply", bound=Data)
Described = TypeVar("Described")
# delete_share_state(group id, share partitions (group, topic id, partition), done(ok)).
DeleteShareState = Callable[[str, list[tuple[str, bytes, int]], Callable[[bool], None]], None]


# ---- error responses (loading, write failures) ------------------------------------------------

def join_error(req: Request[JoinGroupRequest], code: int) -> JoinGroupResponse:
    return JoinGroupResponse(error_code=code, generation_id=-1, protocol_type=None,
                             protocol_name=None if req.version >= 7 else "", leader="",
                             member_id=req.body.member_id, members=[])


def commit_error(req: Request[OffsetCommitRequest], code: int) -> OffsetCommitResponse:
    return OffsetCommitResponse(topics=[
        OffsetCommitResponse.Topic(name=t.name, topic_id=t.topic_id, partitions=[
            OffsetCommitResponse.Topic.Partition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in req.body.topics])


def txn_commit_error(req: Request[TxnOffsetCommitRequest], code: int) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(topics=[
        TxnOffsetCommitResponse.Topic(name=t.name, topic_id=t.topic_id, partitions=[
            TxnOffsetCommitResponse.Topic.Partition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in req.body.topics])


def leave_error(req: Request[LeaveGroupRequest], code: int) -> LeaveGroupResponse:
    return LeaveGroupResponse(error_code=code, members=[])


def delete_offsets_error(req: Request[OffsetDeleteRequest], code: int) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(error_code=code, topics=[])


def describe_error(group_id: str, code: int) -> DescribeGroupsResponse.DescribedGroup:
    return DescribeGroupsResponse.DescribedGroup(error_code=code, group_id=group_id, group_state="", protocol_type="",
                                                 protocol_data="", authorized_operations=_NOT_REQUESTED)


# OffsetFetch v10 (and OffsetCommit v10) name topics by id.
TOPIC_ID_VERSION = 10

# (topic id, partitions) a v10 OffsetFetch asked for by an id no topic has.
UnknownIds = list[tuple[bytes, list[int]]]


def offsets_response(version: int, wanted: list[tuple[str, list[tuple[str, list[int]]] | None]],
                     groups: list[tuple[str, int, list[Any]]], *,
                     topic_id: Callable[[str], bytes | None] | None = None,
                     unknown_ids: dict[str, UnknownIds] | None = None) -> OffsetFetchResponse:
    """The OffsetFetch response (either layout) from each group's error and rows
    ``(topic, partition, offset, leader epoch, metadata, error)``. From v10 each topic is named by
    its id (``topic_id``: a topic without one is left out, as Kafka leaves it out) and the ids no
    topic has (``unknown_ids``, per group) follow the group's topics with UNKNOWN_TOPIC_ID."""
    filled = []
    for (group_id, code, rows), (_, topics) in zip(groups, wanted):
        if code and version >= 8:
            rows = []  # as Kafka: a group refused whole is answered with its error alone
        elif code and topics is not None:
            rows = [(t, p, -1, -1, "", code if version < 2 else 0) for t, ps in topics for p in ps]
        filled.append((group_id, code, rows))
    if version >= 8:
        Topics, Partitions = OffsetFetchResponse.Group.Topics, OffsetFetchResponse.Group.Topics.Partitions
        by_id = version >= TOPIC_ID_VERSION and topic_id is not None
        out = []
        for group_id, code, rows in filled:
            by_topic: dict[str, list[Any]] = {}
            for topic, part, offset, epoch, meta, err in rows:
                by_topic.setdefault(topic, []).append(Partitions(
                    partition_index=part, committed_offset=offset, committed_leader_epoch=epoch,
                    metadata=meta, error_code=err))
            if by_id:
                assert topic_id is not None
                # The name stays on each topic for the authorizer's check; v10 does not carry it.
                named = [(t, topic_id(t), ps) for t, ps in by_topic.items()]
                answer = [Topics(name=t, topic_id=i, partitions=ps) for t, i, ps in named if i is not None]
                if not code:
                    answer += [Topics(name="", topic_id=i, partitions=[Partitions(
                        partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                        error_code=ErrorCode.UNKNOWN_TOPIC_ID) for p in ps])
                        for i, ps in (unknown_ids or {}).get(group_id, [])]
            else:
                answer = [Topics(name=t, partitions=ps) for t, ps in by_topic.items()]
            out.append(OffsetFetchResponse.Group(group_id=group_id, error_code=code, topics=answer))
        return OffsetFetchResponse(groups=out)
    _group_id, code, rows = filled[0]
    by_topic = {}
    for topic, part, offset, epoch, meta, err in rows:
        by_topic.setdefault(topic, []).append(OffsetFetchResponse.Topic.Partition(
            partition_index=part, committed_offset=offset, committed_leader_epoch=epoch,
            metadata=meta, error_code=err))
    return OffsetFetchResponse(
        error_code=code if version >= 2 else 0,
        topics=[OffsetFetchResponse.Topic(name=t, partitions=ps) for t, ps in by_topic.items()])


def sync_error(req: Request[SyncGroupRequest], code: int) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=code, assignment=b"")


def heartbeat_error(req: Request[HeartbeatRequest], code: int) -> HeartbeatResponse:
    return HeartbeatResponse(error_code=code)


def consumer_heartbeat_error(req: Request[ConsumerGroupHeartbeatRequest], code: int) -> ConsumerGroupHeartbeatResponse:
    return consumer_heartbeat_response(code)


def offset_fetch_error(req: Request[OffsetFetchRequest], code: int) -> OffsetFetchResponse:
    """Every group asked for fails with ``code`` (its partitions, when named, with it)."""
    body = req.body
    if req.version >= 8:
        wanted = [(g.group_id, None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics])
                  for g in body.groups]
    else:
        wanted = [(body.group_id, None if body.topics is None else
                   [(t.name, list(t.partition_indexes)) for t in body.topics])]
    return offsets_response(req.version, wanted, [(g, code, []) for g, _ in wanted])


def describe_groups_error(req: Request[DescribeGroupsRequest], code: int) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(groups=[describe_error(g, code) for g in req.body.groups])


def consumer_describe_failed(group_id: str, code: int) -> ConsumerGroupDescribeResponse.DescribedGroup:
    return ConsumerGroupDescribeResponse.DescribedGroup(
        error_code=code, error_message=None, group_id=group_id, group_state="", group_epoch=0, assignment_epoch=0,
        assignor_name="", members=[])


def consumer_describe_error(req: Request[ConsumerGroupDescribeRequest], code: int) -> ConsumerGroupDescribeResponse:
    return ConsumerGroupDescribeResponse(groups=[consumer_describe_failed(g, code) for g in req.body.group_ids])


def list_groups_error(req: Request[ListGroupsRequest], code: int) -> ListGroupsResponse:
    return ListGroupsResponse(error_code=code, groups=[])


def delete_groups_error(req: Request[DeleteGroupsRequest], code: int) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(results=[DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=code)
                                         for g in req.body.groups_names])


class GroupRouting:
    """Which shard runtime coordinates a group (by the hash of its id), remembered for the groups
    seen: every group request asks."""

    def __init__(self, shards: GroupCoordinatorService) -> None:
        self.shards = shards
        self.shard_of: dict[str, GroupShardRuntime] = {}

    def runtime_for(self, group_id: str) -> GroupShardRuntime:
        runtime = self.shard_of.get(group_id)
        if runtime is None:
            shard_of = self.shard_of
            if len(shard_of) >= _SHARD_CACHE_SIZE:
                shard_of.clear()
            shards = self.shards
            runtime = shard_of[group_id] = shards.runtimes[partition_for(group_id, shards.num_partitions)]
        return runtime

    def describe_each(self, group_ids: Sequence[str], describe: Callable[[GroupCoordinatorShard, str], Described],
                      failed: Callable[[str, int], Described], done: Callable[[list[Described]], None], *,
                      empty_id_invalid: bool = True) -> None:
        """The describe APIs' read of several groups, each on its own shard: a group whose
        shard is elsewhere or loading fails alone (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS),
        as does an empty id (INVALID_GROUP_ID, unless ``empty_id_invalid`` is false); the others are
        described at once and answered (``done``, in the order asked) once every write they could
        see is durable; if one of those writes fails, every group answers NOT_COORDINATOR."""
        out: list[Described] = []
        read_from: list[tuple[GroupShardRuntime, str | None]] = []
        for group_id in group_ids:
            if empty_id_invalid and not group_id:
                out.append(failed(group_id, ErrorCode.INVALID_GROUP_ID))
                continue
            runtime = self.runtime_for(group_id)
            if not runtime.serving:
                out.append(failed(group_id, ErrorCode.NOT_COORDINATOR))
            elif not runtime.loaded:
                out.append(failed(group_id, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
            else:
                out.append(describe(runtime.shard, group_id))
                read_from.append((runtime, group_id))

        def answer(durable: bool) -> None:
            done(out if durable else [failed(g, ErrorCode.NOT_COORDINATOR) for g in group_ids])

        self.shards.after_durable(read_from, answer)


def _sync_without_protocol(req: Request[SyncGroupRequest]) -> int:
    """Mandatory from v5: Kafka refuses a SyncGroup without them before it looks at the group."""
    if req.version >= 5 and (req.body.protocol_type is None or req.body.protocol_name is None):
        return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    return ErrorCode.NONE


class SingleGroupApi(Generic[GroupBody, GroupReply]):
    """An API that reads and writes one group: the cheap checks Kafka makes before routing (group
    id, owner, loading), then ``operation`` on the group's shard, answered once durable."""

    __slots__ = ("runtime_for", "operation", "build_error", "empty_id_invalid", "loading_code", "too_large",
                 "describable_topics", "refused")

    def __init__(self, routing: GroupRouting,
                 operation: Callable[[GroupCoordinatorShard, GroupBody, RequestContext, int], Result],
                 build_error: Callable[[Request[GroupBody], int], GroupReply], *,
                 describable_topics: Callable[[str, str], Callable[[str], bool]] | None,
                 empty_id_invalid: bool = True, loading_code: int = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                 too_large: Callable[[GroupBody], bool] | None = None,
                 refused: Callable[[Request[GroupBody]], int] | None = None) -> None:
        """``refused`` is a check Kafka makes before it looks at the group: its non-zero code
        answers the request."""
        self.refused = refused
        self.runtime_for = routing.runtime_for
        self.operation = operation
        self.build_error = build_error
        self.empty_id_invalid = empty_id_invalid
        self.loading_code = loading_code
        self.too_large = too_large
        self.describable_topics = describable_topics

    def __call__(self, req: Request[GroupBody]) -> None:
        group_id = req.body.group_id
        build_error = self.build_error
        if self.refused is not None and (code := self.refused(req)):
            req.reply.set(build_error(req, code))
            return
        if group_id is None or (self.empty_id_invalid and group_id == ""):
            req.reply.set(build_error(req, ErrorCode.INVALID_GROUP_ID))
            return
        if self.too_large is not None and self.too_large(req.body):
            # Kafka cannot write a record above the topic's max.message.bytes and answers the
            # MESSAGE_TOO_LARGE of its log as UNKNOWN_SERVER_ERROR; the group is left as it was.
            req.reply.set(build_error(req, ErrorCode.UNKNOWN_SERVER_ERROR))
            return
        runtime = self.runtime_for(group_id)
        if not runtime.serving:
            # Another node owns the group's partition (cluster mode): the client asks
            # FindCoordinator again and follows the answer.
            req.reply.set(build_error(req, ErrorCode.NOT_COORDINATOR))
            return
        if not runtime.loaded:
            req.reply.set(build_error(req, self.loading_code))
            return
        body = req.body
        operation = self.operation

        # The sender's Describe right on topics: a consumer group's regular expressions that its
        # request resolves leave out the topics it may not describe.
        describable = self.describable_topics
        may_describe = None if describable is None else describable(req.principal, req.client_host)

        def op(shard: GroupCoordinatorShard, token: int, now: int) -> Result:
            # Kafka records the client's address as InetAddress.toString() does: "/127.0.0.1".
            ctx = RequestContext(token=token, api_version=req.version, client_id=req.client_id,
                                 client_host="/" + req.client_host, may_describe_topic=may_describe)
            return operation(shard, body, ctx, now)

        runtime.execute(op, req.reply.set, lambda code: build_error(req, code), group_id, reply=req.reply)


class GroupApis:
    """The group and offset APIs, over the shards of the group coordinator."""

    def __init__(self, shards: GroupCoordinatorService, max_record_bytes: int,
                 describable_topics: Callable[[str, str], Callable[[str], bool]] | None, *,
                 transactions: TransactionCoordinatorService | None = None, clock: Callable[[], int] = lambda: 0,
                 offsets_partitions: int = 50, delete_share_state: DeleteShareState | None = None,
                 adder: PartitionAdder | None = None) -> None:
        """``transactions`` verifies transactional offset commits (None: not verified); ``adder``
        adds the group's offsets partition to the transaction of a TxnOffsetCommit v5 and up
        (transactions version 2: the client sends no AddOffsetsToTxn);
        ``delete_share_state(group_id, keys, done)`` deletes an empty share group's share state
        before DeleteGroups deletes the group: ``keys``, the share partitions its coordinator
        knows it initialized, wherever their state is coordinated, and those this node holds;
        ``done(ok)`` once every deletion is durable."""
        self.delete_share_state = delete_share_state
        self.shards = shards
        self.transactions = transactions
        self.clock = clock
        self.offsets_partitions = offsets_partitions
        self.routing = routing = GroupRouting(shards)
        self.max_record_bytes = max_record_bytes
        self.runtime_for = routing.runtime_for
        Shard = GroupCoordinatorShard
        self.join_group = SingleGroupApi(routing, Shard.join_group, join_error, describable_topics=describable_topics)
        self.sync_group = SingleGroupApi(routing, Shard.sync_group, sync_error, describable_topics=describable_topics,
                                         too_large=self._assignment_too_large, refused=_sync_without_protocol)
        # Heartbeats during a load answer NONE so that members are not kicked out by a failover.
        self.heartbeat = SingleGroupApi(routing, Shard.heartbeat, heartbeat_error,
                                        describable_topics=describable_topics, loading_code=ErrorCode.NONE)
        self.leave_group = SingleGroupApi(routing, Shard.leave_group, leave_error,
                                          describable_topics=describable_topics)
        self.offset_commit = SingleGroupApi(routing, Shard.offset_commit, commit_error,
                                            describable_topics=describable_topics, empty_id_invalid=False)
        self.offset_delete = SingleGroupApi(routing, Shard.offset_delete, delete_offsets_error,
                                            describable_topics=describable_topics)
        self.adder = adder
        self._txn_offset_commit = SingleGroupApi(routing, Shard.txn_offset_commit, txn_commit_error,
                                                 describable_topics=describable_topics,
                                                 refused=self._txn_commit_unverified)
        # KIP-848: the group id is validated by the operation (INVALID_REQUEST, as Kafka answers).
        self.consumer_group_heartbeat = SingleGroupApi(routing, Shard.consumer_group_heartbeat,
                                                       consumer_heartbeat_error, describable_topics=describable_topics,
                                                       empty_id_invalid=False)

    def txn_offset_commit(self, req: Request[TxnOffsetCommitRequest]) -> None:
        """v5 and up (transactions version 2): the group's offsets partition is added to the
        producer's transaction first, then the offsets are written as for the earlier versions."""
        body = req.body
        if req.version < TXN_OFFSET_COMMIT_TV2_VERSION or self.adder is None:
            self._txn_offset_commit(req)
            return
        tp = (OFFSETS_TOPIC, partition_for(body.group_id, self.offsets_partitions))

        def added(codes: dict[tuple[str, int], int]) -> None:
            code = codes.get(tp, ErrorCode.NOT_COORDINATOR)
            if code:
                req.reply.set(txn_commit_error(req, _ADD_OFFSETS_ERRORS.get(code, code)))
            else:
                self._txn_offset_commit(req)

        self.adder.add(body.transactional_id, body.producer_id, body.producer_epoch, [tp], added)

    def _txn_commit_unverified(self, req: Request[TxnOffsetCommitRequest]) -> int:
        """KIP-890 (transaction.partition.verification.enable): Kafka writes a transactional offset
        commit only once the transaction coordinator confirms that the group's offsets partition is
        in the producer's ongoing transaction with that epoch; a fenced epoch is answered
        INVALID_PRODUCER_EPOCH. Checked here when this node coordinates the transactional id."""
        service = self.transactions
        body = req.body
        if service is None or service.error_for(body.transactional_id):
            return ErrorCode.NONE
        tp = (OFFSETS_TOPIC, partition_for(body.group_id, self.offsets_partitions))
        result = service.shard_for(body.transactional_id).add_partitions(
            body.transactional_id, body.producer_id, body.producer_epoch, [tp], self.clock(), verify_only=True)
        code = result.partition_errors.get(tp, result.error)
        return ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED else code

    def _assignment_too_large(self, body: SyncGroupRequest) -> bool:
        return sum(len(a.assignment) + len(a.member_id) for a in body.assignments) > self.max_record_bytes

    def offset_fetch(self, req: Request[OffsetFetchRequest]) -> None:
        body = req.body
        members: dict[str, tuple[str | None, int]] = {}
        unknown_ids: dict[str, UnknownIds] = {}
        topic_id: Callable[[str], bytes | None] | None = None
        if req.version >= TOPIC_ID_VERSION:
            # Topics named by id, as Kafka's KafkaApis resolves them before its coordinator: an id
            # no topic has is answered UNKNOWN_TOPIC_ID after the group's other topics.
            wanted, unknown_ids, asked_ids = self._resolve_topic_ids(body)

            def topic_id(name: str) -> bytes | None:
                return asked_ids.get(name) or self.shards.topics.topic_id(name)

            members = {g.group_id: (g.member_id, g.member_epoch) for g in body.groups}
        elif req.version >= 8:
            wanted = [(g.group_id, None if g.topics is None else
                       [(t.name, list(t.partition_indexes)) for t in g.topics]) for g in body.groups]
            if req.version >= 9:
                # KIP-848 members name themselves and their epoch (checked for consumer groups).
                members = {g.group_id: (g.member_id, g.member_epoch) for g in body.groups}
        else:
            wanted = [(body.group_id, None if body.topics is None else
                       [(t.name, list(t.partition_indexes)) for t in body.topics])]
        groups: list[tuple[str, int, list[Any]]] = []
        read_from: list[tuple[GroupShardRuntime, str | None]] = []
        for group_id, topics in wanted:
            runtime = self.runtime_for(group_id)
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
                req.reply.set(offsets_response(req.version, wanted,
                                               [(g, ErrorCode.NOT_COORDINATOR, []) for g, _, _ in groups]))
            else:
                req.reply.set(offsets_response(req.version, wanted, groups, topic_id=topic_id,
                                               unknown_ids=unknown_ids))

        self.shards.after_durable(read_from, answer)

    def _resolve_topic_ids(self, body: OffsetFetchRequest) -> tuple[
            list[tuple[str, list[tuple[str, list[int]]] | None]], dict[str, UnknownIds], dict[str, bytes]]:
        """A v10 request's groups with their topics named: (what each group asks by name, the ids
        no topic has per group, the id each name was asked by)."""
        topic_name = self.shards.topics.topic_name
        wanted: list[tuple[str, list[tuple[str, list[int]]] | None]] = []
        unknown: dict[str, UnknownIds] = {}
        asked: dict[str, bytes] = {}
        for g in body.groups:
            if g.topics is None:
                wanted.append((g.group_id, None))
                continue
            named = []
            for t in g.topics:
                name = topic_name(t.topic_id) if t.topic_id != _ZERO_ID else None
                if name is None:
                    unknown.setdefault(g.group_id, []).append((t.topic_id, list(t.partition_indexes)))
                else:
                    asked[name] = t.topic_id
                    named.append((name, list(t.partition_indexes)))
            wanted.append((g.group_id, named))
        return wanted, unknown, asked

    def describe_groups(self, req: Request[DescribeGroupsRequest]) -> None:
        def answer(groups: list[DescribeGroupsResponse.DescribedGroup]) -> None:
            if req.version >= 3 and req.body.include_authorized_operations:
                # Without an authorizer Kafka reports every group operation (with one, the
                # request checks put the principal's own in their place).
                for group in groups:
                    if group.error_code == 0:
                        group.authorized_operations = all_operations(ResourceType.GROUP)
            req.reply.set(DescribeGroupsResponse(groups=groups))

        self.routing.describe_each(req.body.groups, lambda shard, g: shard.describe_group(g, req.version),
                                   describe_error, answer, empty_id_invalid=False)

    def consumer_group_describe(self, req: Request[ConsumerGroupDescribeRequest]) -> None:
        def answer(groups: list[ConsumerGroupDescribeResponse.DescribedGroup]) -> None:
            if req.body.include_authorized_operations:
                for group in groups:
                    if group.error_code == 0:
                        group.authorized_operations = all_operations(ResourceType.GROUP)
            req.reply.set(ConsumerGroupDescribeResponse(groups=groups))

        self.routing.describe_each(req.body.group_ids, GroupCoordinatorShard.consumer_group_describe, consumer_describe_failed,
                                   answer)

    def list_groups(self, req: Request[ListGroupsRequest]) -> None:
        if self.shards.loading:
            req.reply.set(ListGroupsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, groups=[]))
            return
        body = req.body
        states = {s.lower() for s in body.states_filter} if req.version >= 4 and body.states_filter else None
        types = {t.lower() for t in body.types_filter} if req.version >= 5 and body.types_filter else None
        groups = []
        # The groups this node coordinates (in a cluster, clients ask every node and merge).
        serving = self.shards.serving_runtimes()
        for runtime in serving:
            groups.extend(runtime.shard.list_groups(states, types))

        def answer(durable: bool) -> None:
            if durable:
                req.reply.set(ListGroupsResponse(error_code=0, groups=groups))
            else:
                req.reply.set(ListGroupsResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, groups=[]))

        self.shards.after_durable([(runtime, None) for runtime in serving], answer)

    def delete_groups(self, req: Request[DeleteGroupsRequest]) -> None:
        names = list(req.body.groups_names)
        results: list[Any] = [None] * len(names)
        Deleted = DeleteGroupsResponse.DeletableGroupResult
        # Every group's result arrives (an error is a result too): the countdown never fails.
        all_done = Countdown(len(names), lambda _ok: req.reply.set(DeleteGroupsResponse(results=results)),
                             started=False)

        def done(index: int, result: DeleteGroupsResponse.DeletableGroupResult) -> None:
            results[index] = result
            all_done.arrive()

        for index, group_id in enumerate(names):
            runtime = self.runtime_for(group_id)
            if not runtime.serving:
                done(index, Deleted(group_id=group_id, error_code=ErrorCode.NOT_COORDINATOR))
                continue
            if not runtime.loaded:
                done(index, Deleted(group_id=group_id, error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
                continue
            self._delete_group(runtime, group_id, partial(done, index))
        all_done.start()

    def _delete_group(self, runtime: GroupShardRuntime, group_id: str,
                      deliver: Callable[[DeleteGroupsResponse.DeletableGroupResult], None]) -> None:
        """One group of a DeleteGroups, deleted on its shard once durable; ``deliver`` gets its
        result. As Kafka's group coordinator, an empty share group's share state goes first,
        through the persister to wherever it is coordinated, and the group only once that is
        durable: a group whose state could not be deleted stays, and deleting it again is safe."""
        Deleted = DeleteGroupsResponse.DeletableGroupResult

        def op(shard: GroupCoordinatorShard, token: int, now: int) -> Result:
            code, records = shard.delete_group(group_id, now)
            return Result(replies=[(token, Deleted(group_id=group_id, error_code=code))], records=records)

        def delete() -> None:
            runtime.execute(op, deliver, lambda code: Deleted(group_id=group_id, error_code=code), group_id)

        view = runtime.shard.share_group_view(group_id)
        if view is None or view[0] or self.delete_share_state is None:
            delete()  # not a share group, or one with members (NON_EMPTY_GROUP)
            return

        def state_deleted(ok: bool) -> None:
            if ok:
                delete()
            else:
                deliver(Deleted(group_id=group_id, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE))

        self.delete_share_state(group_id, runtime.shard.share_partitions(group_id), state_deleted)

