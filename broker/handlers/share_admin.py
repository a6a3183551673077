"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932): a
share group's start offsets, read from and written to its share partitions (``broker/share_partitions/service``);
whether the group exists and is empty is its coordinator shard's answer. Alterations and
deletions are answered once their ``__share_group_state`` records are durable."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.shard import GroupCoordinatorShard
from broker.handlers.groups import GroupRouting
from broker.network.router import Request
from broker.runtime.countdown import Countdown
from broker.share_partitions.core.partition import ACKNOWLEDGED, ARCHIVED, SharePartition
from broker.share_partitions.service.manager import Key, SharePartitionManager
from broker.topics.catalog import TopicCatalog
from broker.topics.partitions import TopicLogs
from protocol.errors import ErrorCode
from protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
)
from protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
)
from protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)

_DGroup = DescribeShareGroupOffsetsResponse.Group
_DTopic = DescribeShareGroupOffsetsResponse.Group.Topic
_DPart = DescribeShareGroupOffsetsResponse.Group.Topic.Partition


def describe_offsets_error(req: Request[DescribeShareGroupOffsetsRequest], code: int) -> DescribeShareGroupOffsetsResponse:
    return DescribeShareGroupOffsetsResponse(groups=[_DGroup(group_id=g.group_id, topics=[], error_code=code)
                                                     for g in req.body.groups])


def alter_offsets_error(req: Request[AlterShareGroupOffsetsRequest], code: int) -> AlterShareGroupOffsetsResponse:
    return AlterShareGroupOffsetsResponse(error_code=code, responses=[])


def delete_offsets_error(req: Request[DeleteShareGroupOffsetsRequest], code: int) -> DeleteShareGroupOffsetsResponse:
    return DeleteShareGroupOffsetsResponse(error_code=code, responses=[])


# (topic, partition) pairs this node does not serve -> done({(topic, partition): high watermark})
# with those their leaders answered (in a cluster: ListOffsets to each leader).
RemoteEnds = Callable[[list[tuple[str, int]], Callable[[dict[tuple[str, int], int]], None]], None]


def _no_remote_ends(wanted: list[tuple[str, int]], done: Callable[[dict[tuple[str, int], int]], None]) -> None:
    done({})


class ShareOffsetApis:
    def __init__(self, routing: GroupRouting, service: SharePartitionManager, topic_logs: TopicLogs,
                 catalog: TopicCatalog, remote_ends: RemoteEnds = _no_remote_ends) -> None:
        """``remote_ends``: the high watermarks of partitions another node leads, for their lag."""
        self.routing = routing
        self.service = service
        self.topic_logs = topic_logs
        self.catalog = catalog
        self.remote_ends = remote_ends

    def _group(self, group_id: str) -> tuple[int, int, dict[bytes, frozenset[int]]]:
        """(error, members, initialized partitions) of a share group, as its shard knows it."""
        runtime = self.routing.runtime_for(group_id)
        if not runtime.serving:
            return ErrorCode.NOT_COORDINATOR, 0, {}
        if not runtime.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, 0, {}
        view = runtime.shard.share_group_view(group_id)
        if view is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, 0, {}
        return ErrorCode.NONE, view[0], view[1]

    def _unknown(self, group_id: str) -> bool:
        """The id names no group of any kind (Kafka describes such a group as one without share
        state, and AlterShareGroupOffsets creates it)."""
        return not self.routing.runtime_for(group_id).shard.has_group(group_id)

    def _end(self, topic_name: str, index: int) -> int | None:
        """The high watermark of a partition this node serves (None: it does not serve it)."""
        topic = self.catalog.get(topic_name)
        src = self.topic_logs.readable(topic, index) if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return None if isinstance(src, int) else src.high_watermark

    def _lag(self, end: int | None, start: int, done: int) -> int:
        """Records from the start offset to the end not yet acknowledged or archived."""
        if end is None or start < 0:
            return -1
        return max(0, end - start - done)

    def describe_share_group_offsets(self, req: Request[DescribeShareGroupOffsetsRequest]) -> None:
        """Each share partition's start offset, from this node's share partitions or, for those it
        does not hold (in a cluster, those another node leads), as their share coordinator has it."""
        asked: list[tuple[Any, int, dict[str, list[int]], dict[tuple[bytes, int], SharePartition]]] = []
        missing: list[Key] = []
        for g in req.body.groups:
            code, _, initialized = self._group(g.group_id)
            if code == ErrorCode.GROUP_ID_NOT_FOUND and self._unknown(g.group_id):
                # As Kafka: a group that does not exist has no share state, which is no error.
                code = ErrorCode.NONE
            if code:
                asked.append((g, code, {}, {}))
                continue
            state = self.service.of_group(g.group_id)
            wanted: dict[str, list[int]] = {}
            if g.topics is None:
                for topic_id, ps in initialized.items():
                    t = self.catalog.by_id.get(topic_id)
                    if t is not None:
                        wanted.setdefault(t.name, []).extend(ps)
                for topic_id, index in state:
                    t = self.catalog.by_id.get(topic_id)
                    if t is not None and index not in wanted.setdefault(t.name, []):
                        wanted[t.name].append(index)
            else:
                wanted = {}
                for asked_topic in g.topics:
                    wanted.setdefault(asked_topic.topic_name, []).extend(asked_topic.partitions)
            for name, indexes in wanted.items():
                topic = self.catalog.get(name)
                if topic is not None:
                    missing += [(g.group_id, topic.topic_id, i) for i in indexes if (topic.topic_id, i) not in state]
            asked.append((g, 0, wanted, state))

        ends: dict[tuple[str, int], int] = {}
        elsewhere = []
        for _g, _code, wanted, _state in asked:
            for name, indexes in wanted.items():
                for index in dict.fromkeys(indexes):
                    end = self._end(name, index)
                    if end is not None:
                        ends[(name, index)] = end
                    elif self.catalog.get(name) is not None:
                        elsewhere.append((name, index))
        gathered: list[dict[Key, SharePartition]] = []

        def answer() -> None:
            found = gathered[0]
            groups = []
            for g, code, wanted, state in asked:
                if code:
                    groups.append(_DGroup(group_id=g.group_id, topics=[], error_code=code,
                                          error_message=None if code != ErrorCode.GROUP_ID_NOT_FOUND else
                                          f"Group {g.group_id} not found."))
                    continue
                state.update({(k[1], k[2]): sp for k, sp in found.items() if k[0] == g.group_id})
                groups.append(_DGroup(group_id=g.group_id, topics=self._described(wanted, state, ends), error_code=0))
            req.reply.set(DescribeShareGroupOffsetsResponse(groups=groups))

        # Both the share state of the partitions held elsewhere and the ends of those other nodes
        # lead, then the answer.
        countdown = Countdown(2, lambda ok: answer())

        def states(found: dict[Key, SharePartition]) -> None:
            gathered.append(found)
            countdown.arrive(True)

        def remote(answered: dict[tuple[str, int], int]) -> None:
            ends.update(answered)
            countdown.arrive(True)

        self.service.gather(missing, states)
        if elsewhere:
            self.remote_ends(elsewhere, remote)
        else:
            remote({})

    def _described(self, wanted: dict[str, list[int]], state: dict[tuple[bytes, int], SharePartition],
                   ends: dict[tuple[str, int], int]) -> list[Any]:
        # In the order asked (Kafka's); a topic that does not exist, or a partition without share
        # state, is described as Kafka describes it: no start offset, no lag, no error.
        topics = []
        for name, indexes in wanted.items():
            topic = self.catalog.get(name)
            if topic is None:
                topics.append(_DTopic(topic_name=name, topic_id=bytes(16), partitions=[
                    _DPart(partition_index=i, start_offset=-1, leader_epoch=0, lag=-1, error_code=0)
                    for i in sorted(set(indexes))]))
                continue
            parts = []
            for index in sorted(set(indexes)):
                sp = state.get((topic.topic_id, index))
                if sp is None or not sp.initialized:
                    parts.append(_DPart(partition_index=index, start_offset=-1, leader_epoch=0, lag=-1,
                                        error_code=0))
                    continue
                done = sum(1 for r in sp.records.values() if r.state in (ACKNOWLEDGED, ARCHIVED))
                parts.append(_DPart(partition_index=index, start_offset=sp.start_offset, leader_epoch=0,
                                    lag=self._lag(ends.get((name, index)), sp.start_offset, done), error_code=0))
            topics.append(_DTopic(topic_name=name, topic_id=topic.topic_id, partitions=parts))
        return topics

    def _empty_group_error(self, group_id: str) -> tuple[int, str | None]:
        code, members, _ = self._group(group_id)
        if code:
            return code, None
        if members:
            return ErrorCode.NON_EMPTY_GROUP, "The group has active members."
        return ErrorCode.NONE, None

    def alter_share_group_offsets(self, req: Request[AlterShareGroupOffsetsRequest]) -> None:
        body = req.body
        code, message = self._empty_group_error(body.group_id)
        if code == ErrorCode.GROUP_ID_NOT_FOUND and self._unknown(body.group_id):
            code = ErrorCode.NONE  # as Kafka: the alteration creates the share group
        if code:
            req.reply.set(AlterShareGroupOffsetsResponse(error_code=code, error_message=message, responses=[]))
            return
        P = AlterShareGroupOffsetsResponse.Topic.Partition
        changed: list[Key] = []
        starts: dict[Key, int] = {}
        altered: dict[bytes, tuple[str, frozenset[int]]] = {}
        responses: list[Any] = []
        for t in body.topics:
            topic = self.catalog.get(t.topic_name)
            parts = []
            for p in t.partitions:
                if topic is None or not 0 <= p.partition_index < topic.partitions:
                    parts.append(P(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                key = (body.group_id, topic.topic_id, p.partition_index)
                changed.append(key)
                starts[key] = max(0, p.start_offset)
                name, indexes = altered.get(topic.topic_id, (topic.name, frozenset()))
                altered[topic.topic_id] = (name, indexes | {p.partition_index})
                parts.append(P(partition_index=p.partition_index, error_code=0))
            responses.append(AlterShareGroupOffsetsResponse.Topic(
                topic_name=t.topic_name, topic_id=topic.topic_id if topic is not None else bytes(16), partitions=parts))

        # As Kafka answers: the topics that do not exist first.
        responses.sort(key=lambda r: r.topic_id != bytes(16))

        def durable(ok: bool) -> None:
            # In a cluster the leaders of these partitions read the new start again (their next
            # write is fenced by the new state epoch); this node keeps no copy of those it does not lead.
            self.service.drop_unled(changed)
            req.reply.set(AlterShareGroupOffsetsResponse(error_code=0, responses=responses) if ok else
                          alter_offsets_error(req, ErrorCode.UNKNOWN_SERVER_ERROR))

        def recorded(answer: AlterShareGroupOffsetsResponse) -> None:
            """The group's records (the partitions initialized; a new group) are durable: the
            share state is written next, and the answer follows once that is durable too."""
            if answer.error_code:
                req.reply.set(answer)
                return
            for key in changed:
                self.service.reset(key, starts[key])
            self.service.persist(changed, durable)

        def op(shard: GroupCoordinatorShard, token: int, now: int) -> Result:
            error, records = shard.share_group_alter_offsets(body.group_id, altered)
            return Result(replies=[(token, alter_offsets_error(req, error))], records=records)

        self.routing.runtime_for(body.group_id).execute(op, recorded, partial(alter_offsets_error, req), body.group_id)

    def delete_share_group_offsets(self, req: Request[DeleteShareGroupOffsetsRequest]) -> None:
        body = req.body
        code, message = self._empty_group_error(body.group_id)
        if code:
            req.reply.set(DeleteShareGroupOffsetsResponse(error_code=code, error_message=message, responses=[]))
            return
        state = self.service.of_group(body.group_id)
        initialized = self._group(body.group_id)[2]
        gone: list[Key] = []
        responses = []
        for t in body.topics:
            topic = self.catalog.get(t.topic_name)
            if topic is None:
                responses.append(DeleteShareGroupOffsetsResponse.Topic(
                    topic_name=t.topic_name, topic_id=bytes(16), error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            gone += [(body.group_id, topic_id, index) for topic_id, index in state if topic_id == topic.topic_id]
            # In a cluster another node may coordinate (or lead) a partition's state: every
            # partition the group initialized is deleted too (deleting a key never written is no error).
            gone += [(body.group_id, topic.topic_id, index) for index in initialized.get(topic.topic_id, ())]
            responses.append(DeleteShareGroupOffsetsResponse.Topic(topic_name=t.topic_name, topic_id=topic.topic_id,
                                                                   error_code=0))

        def durable(ok: bool) -> None:
            req.reply.set(DeleteShareGroupOffsetsResponse(error_code=0, responses=responses) if ok else
                          delete_offsets_error(req, ErrorCode.UNKNOWN_SERVER_ERROR))

        self.service.forget(gone, durable)
