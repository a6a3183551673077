"""The share-group APIs: ShareGroupHeartbeat and ShareGroupDescribe on the group's coordinator
shard; ShareFetch and ShareAcknowledge on the partitions' leader, over the share partitions of
``broker/share_partitions/service`` (a partition another node of a cluster leads is answered
NOT_LEADER_OR_FOLLOWER, as Kafka answers it; the client finds the leader again).

ShareFetch and ShareAcknowledge: acknowledgements are applied first and the answer leaves only
once the share partitions they changed are durable in ``__share_group_state``; then ShareFetch
acquires records for the member (read from the topic log up to the high watermark, or the last
stable offset) and, when none are available, waits up to ``max_wait_ms`` for new data.
A share partition starts where its group's ``share.auto.offset.reset`` says at its first fetch
(the partition's end by default, as in Kafka). Every share partition obeys its group's settings
(``SharePartitionManager.settings``): lock duration, delivery limit, in-flight cap and isolation level.
"""

from __future__ import annotations

from typing import Any

import trio

from broker.coordinators.group.core.base.context import RequestContext
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.shard import GroupCoordinatorShard
from broker.coordinators.group.core.share import describe as share_describe
from broker.coordinators.group.service.coordinator import GroupCoordinatorService
from broker.handlers.fetch import below
from broker.handlers.groups import GroupRouting, SingleGroupApi
from broker.network.router import Request
from broker.security.acl_model import ResourceType, all_operations
from broker.share_partitions.core.partition import BatchRange
from broker.share_partitions.core.settings import BY_DURATION, EARLIEST, Reset
from broker.share_partitions.service.manager import Key, SharePartitionManager, ShareSession
from broker.topics.catalog import TopicCatalog
from broker.topics.partitions import TopicLogs
from protocol.errors import ErrorCode
from protocol.messages.share_acknowledge import ShareAcknowledgeRequest, ShareAcknowledgeResponse
from protocol.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from protocol.messages.share_group_describe import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from storage.partition_log import PartitionLog
from storage.txn_index import AbortedTxn

_FetchPart = ShareFetchResponse.ShareFetchableTopicResponse.PartitionData
_AckPart = ShareAcknowledgeResponse.TopicResponse.PartitionData
_CONTROL = 0x20
_TRANSACTIONAL = 0x10
RECORD_LIMIT = 1  # ShareFetch's ShareAcquireMode: 0 batch-optimized, 1 record-limit
_MAX_EPOCH = 2**31 - 1


def share_heartbeat_error(req: Request[ShareGroupHeartbeatRequest], code: int) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(error_code=code, member_id=None, member_epoch=0, heartbeat_interval_ms=0)


def share_describe_error(req: Request[ShareGroupDescribeRequest], code: int) -> ShareGroupDescribeResponse:
    return ShareGroupDescribeResponse(groups=[share_describe.failed(g, code) for g in req.body.group_ids])


def share_fetch_error(req: Request[ShareFetchRequest], code: int) -> ShareFetchResponse:
    return ShareFetchResponse(error_code=code, acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])


def share_acknowledge_error(req: Request[ShareAcknowledgeRequest], code: int) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(error_code=code, acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])


def _ignore(ok: bool) -> None:
    """Released records need no durability of their own: after a restart they are available anyway."""
    del ok


def batch_ranges(data: bytes, aborted: list[AbortedTxn] | None = None) -> list[BatchRange]:
    """The offsets of each stored batch in ``data`` (its header only is read); with ``aborted``
    (a read_committed group), whether each transactional batch belongs to one of those aborted
    transactions."""
    out = []
    pos, n = 0, len(data)
    while pos + 61 <= n:
        base = int.from_bytes(data[pos:pos + 8], "big", signed=True)
        length = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        attributes = int.from_bytes(data[pos + 21:pos + 23], "big")
        last_delta = int.from_bytes(data[pos + 23:pos + 27], "big", signed=True)
        control = bool(attributes & _CONTROL)
        dropped = False
        if aborted and attributes & _TRANSACTIONAL and not control:
            producer = int.from_bytes(data[pos + 43:pos + 51], "big", signed=True)
            dropped = any(t.producer_id == producer and t.first_offset <= base < t.last_offset for t in aborted)
        out.append(BatchRange(base, base + last_delta, control, dropped))
        pos += 12 + length
    return out


def start_offset(reset: Reset, log: PartitionLog, high_watermark: int, now_ms: int) -> int:
    """Where a share partition with no state starts (``share.auto.offset.reset``): the log start,
    the first record no older than the duration (the end when there is none), or the end."""
    if reset.kind == EARLIEST:
        return log.log_start_offset
    if reset.kind == BY_DURATION:
        found = log.offset_for_timestamp(now_ms - reset.duration_ms)
        if found is not None and found[0] < high_watermark:
            return max(found[0], log.log_start_offset)
    return high_watermark


class ShareApis:
    def __init__(self, shards: GroupCoordinatorService, routing: GroupRouting, service: SharePartitionManager | None, topic_logs: TopicLogs,
                 catalog: TopicCatalog, node_id: int) -> None:
        self.shards = shards
        self.routing = routing
        self._service = service
        self.topic_logs = topic_logs
        self.catalog = catalog
        self.node_id = node_id
        # The member id is the client's own; the group id is checked by the operation.
        self.share_group_heartbeat = SingleGroupApi(routing, self._heartbeat, share_heartbeat_error,
                                                    describable_topics=None, empty_id_invalid=False)

    @property
    def service(self) -> SharePartitionManager:
        assert self._service is not None, "share partitions are not served in a cluster"
        return self._service

    def _heartbeat(self, shard: GroupCoordinatorShard, body: ShareGroupHeartbeatRequest, ctx: RequestContext,
                   now: int) -> Result:
        """The heartbeat on the group's shard. A member that leaves keeps its share session: as in
        Kafka 4.4, what it holds goes back when that session ends (its close, which carries its
        last acknowledgements and may well arrive after the leave, or its idleness) or when its
        locks expire, not at the leave itself."""
        return shard.share_group_heartbeat(body, ctx, now)

    # ---- membership -----------------------------------------------------------------------------

    def share_group_describe(self, req: Request[ShareGroupDescribeRequest]) -> None:
        def answer(groups: list[ShareGroupDescribeResponse.DescribedGroup]) -> None:
            if req.body.include_authorized_operations:
                for group in groups:
                    if group.error_code == 0:
                        group.authorized_operations = all_operations(ResourceType.GROUP)
            req.reply.set(ShareGroupDescribeResponse(groups=groups))

        self.routing.describe_each(req.body.group_ids, lambda shard, g: shard.share_group_describe(g),
                                   share_describe.failed, answer)

    # ---- sessions -------------------------------------------------------------------------------

    def _session(self, group: str, member: str, epoch: int, conn_id: int = -1,
                 ) -> tuple[int, ShareSession | None, list[Key]]:
        """(error, session, share partitions released): epoch 0 opens a session (a previous one
        of the member is closed), -1 closes it, any other must be the session's next epoch."""
        sessions = self.service.sessions
        key = (group, member)
        released: list[Key] = []
        if epoch == 0:
            if key in sessions:
                released = self.service.release_member(group, member)
            elif len(sessions) >= self.service.max_sessions:
                return ErrorCode.SHARE_SESSION_LIMIT_REACHED, None, released
            opened = sessions[key] = ShareSession(1, set(), self.service.steady(), conn_id)
            self.service.session_opened(group)
            return ErrorCode.NONE, opened, released
        session = sessions.get(key)
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None, released
        if epoch == -1:
            del sessions[key]
            return ErrorCode.NONE, session, released
        if epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None, released
        session.epoch = 1 if session.epoch >= _MAX_EPOCH else session.epoch + 1
        session.last_used_ms = self.service.steady()
        return ErrorCode.NONE, session, released

    def _acknowledge(self, group: str, member: str, topic_id: bytes, partition: int, batches: list[Any],
                     changed: list[Key]) -> int:
        if not batches:
            return ErrorCode.NONE
        topic = self.catalog.by_id.get(topic_id)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_ID
        src = self.topic_logs.readable(topic, partition)
        if isinstance(src, int):
            return src  # NOT_LEADER_OR_FOLLOWER in a cluster: another node leads it
        key = (group, topic_id, partition)
        sp = self.service.partitions.get(key)
        if sp is None:
            return ErrorCode.INVALID_RECORD_STATE
        code: int = ErrorCode.NONE
        now = self.service.steady()  # a renewed lock's deadline
        limits = self.service.limits(group)
        for b in batches:
            err = sp.acknowledge(member, b.first_offset, b.last_offset, list(b.acknowledge_types), limits, now)
            code = code or err
        changed.append(key)
        self.service.wake()  # released or rejected records may be what another member waits for
        return code

    # ---- ShareFetch -----------------------------------------------------------------------------

    def share_fetch(self, req: Request[ShareFetchRequest]) -> None:
        body = req.body
        if not body.group_id or not body.member_id:
            req.reply.set(share_fetch_error(req, ErrorCode.INVALID_REQUEST))
            return
        group, member = body.group_id, body.member_id
        error, session, changed = self._session(group, member, body.share_session_epoch, req.conn.conn_id)
        if session is None:
            req.reply.set(share_fetch_error(req, error))
            return
        for t in body.topics:
            for p in t.partitions:
                if body.share_session_epoch != -1:
                    session.partitions.add((t.topic_id, p.partition_index))
        for forgotten in body.forgotten_topics_data:
            for index in forgotten.partitions:
                session.partitions.discard((forgotten.topic_id, index))
        # The share partitions' state is read first (a first use after a start reads it from the
        # share coordinator), then acknowledgements apply and records are acquired.
        known = self.catalog.by_id
        keys = [(group, t, i) for t, i in session.partitions if t in known] + [
            (group, t.topic_id, p.partition_index) for t in body.topics if t.topic_id in known for p in t.partitions]
        self.service.prepare(keys, lambda ok: self._fetch_prepared(req, group, member, session, changed))

    def _fetch_prepared(self, req: Request[ShareFetchRequest], group: str, member: str, session: ShareSession,
                        changed: list[Key]) -> None:
        body = req.body
        ack_codes: dict[tuple[bytes, int], int] = {}
        for t in body.topics:
            for p in t.partitions:
                if p.acknowledgement_batches:  # a partition is answered for its acknowledgements
                    ack_codes[(t.topic_id, p.partition_index)] = self._acknowledge(
                        group, member, t.topic_id, p.partition_index, p.acknowledgement_batches, changed)
        if body.share_session_epoch == -1:
            changed += self.service.release_member(group, member)
        wanted = [] if body.share_session_epoch == -1 else sorted(session.partitions)
        max_records = body.max_records if body.max_records > 0 else 500
        # Kafka's default acquire mode (batch-optimized) ends an acquisition at a batch boundary
        # only; record-limit mode (ShareFetch v2) stops at max_records exactly.
        whole_batches = body.share_acquire_mode != RECORD_LIMIT

        def durable(ok: bool) -> None:
            if not ok:
                req.reply.set(share_fetch_error(req, ErrorCode.UNKNOWN_SERVER_ERROR))
                return
            response, got, waits, started = self._acquire(group, member, wanted, ack_codes, body.max_bytes,
                                                           max_records, whole_batches=whole_batches)
            if got or body.max_wait_ms <= 0 or not wanted:
                self._answer_after_init(req, response, started)
                return
            self.topic_logs.spawn(self._park, req, response, waits, trio.current_time() + body.max_wait_ms / 1000,
                                  group, member, wanted, ack_codes, max_records, started)

        self.service.persist(changed, durable)

    def _answer_after_init(self, req: Request[ShareFetchRequest], response: ShareFetchResponse,
                           pending: list[Key]) -> None:
        """Answers once the share partitions this fetch started (at the partition's end) are
        durable: a restart must not move their start to a later end."""
        if not pending:
            req.reply.set(response)
            return

        def done(ok: bool) -> None:
            req.reply.set(response if ok else share_fetch_error(req, ErrorCode.UNKNOWN_SERVER_ERROR))

        self.service.persist(pending, done)

    async def _park(self, req: Request[ShareFetchRequest], response: ShareFetchResponse, waits: list[Any],
                    deadline: float, group: str, member: str, wanted: list[tuple[bytes, int]],
                    ack_codes: dict[tuple[bytes, int], int], max_records: int, started: list[Key]) -> None:
        while trio.current_time() < deadline:
            # Woken by an append to one of the logs (their watchers) or by anything else that can
            # make records available or end the session (the share partitions' watchers).
            woken = trio.Event()
            for s in waits:
                s.watchers.add(woken)
            self.service.watchers.add(woken)
            with trio.move_on_at(deadline):
                await woken.wait()
            for s in waits:
                s.watchers.discard(woken)
            self.service.watchers.discard(woken)
            if (group, member) not in self.service.sessions:
                break
            response, got, waits, more = self._acquire(group, member, wanted, {}, req.body.max_bytes, max_records,
                                                       ack_codes, whole_batches=req.body.share_acquire_mode != RECORD_LIMIT)
            started += more
            if got:
                break
        self._answer_after_init(req, response, started)

    def _acquire(self, group: str, member: str, wanted: list[tuple[bytes, int]], ack_codes: dict[tuple[bytes, int], int],
                 max_bytes: int, max_records: int,
                 earlier_acks: dict[tuple[bytes, int], int] | None = None, whole_batches: bool = True,
                 ) -> tuple[ShareFetchResponse, bool, list[Any], list[Key]]:
        service = self.service
        now = service.clock()  # where a share partition starts (by duration)
        lock_now = service.steady()  # acquisition locks
        settings = service.settings(group)
        by_topic: dict[bytes, list[Any]] = {}
        waits: list[Any] = []
        got_any = False
        budget = max_bytes
        acks = dict(earlier_acks or {})
        acks.update(ack_codes)
        listed = set(acks)
        started: list[Key] = []
        for topic_id, index in wanted:
            pd = _FetchPart(partition_index=index, error_code=0, acknowledge_error_code=acks.get((topic_id, index), 0),
                            current_leader=_FetchPart.LeaderIdAndEpoch(leader_id=self.node_id, leader_epoch=0),
                            records=b"", acquired_records=[])
            topic = self.catalog.by_id.get(topic_id)
            src = self.topic_logs.readable(topic, index) if topic is not None else ErrorCode.UNKNOWN_TOPIC_ID
            if isinstance(src, int):
                pd.error_code = src
                # Not this node's: the leader is for the client's metadata to say.
                pd.current_leader = _FetchPart.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
                by_topic.setdefault(topic_id, []).append(pd)
                continue
            waits.append(src)
            log, hw = src.log, src.high_watermark
            visible = hw
            txns = None
            if settings.read_committed and topic is not None:
                data_state = self.topic_logs.states.get((topic.name, index))
                if data_state is not None and data_state.txns is not None:
                    txns = data_state.txns
                    visible = txns.last_stable_offset(hw)
            key = (group, topic_id, index)
            found = service.partitions.get(key)
            if found is None:
                # Its state could not be read from the share coordinator yet (it is moving to
                # another node, or loading): nothing is delivered from it until it can be, and the
                # client, told nothing, fetches again.
                if (topic_id, index) in listed:
                    by_topic.setdefault(topic_id, []).append(pd)
                continue
            sp = found
            if not sp.initialized:
                sp.initialize(start_offset(settings.reset, log, hw, now))
                started.append(key)
            sp.move_start(log.log_start_offset)
            start = sp.read_from()
            if start < visible and budget > 0 and max_records > 0:
                try:
                    data = below(log.read(start, budget), visible)
                except Exception:  # the log moved under us (retention, deletion): nothing this time
                    data = b""
                aborted = txns.aborted_between(start, visible) if txns is not None and txns.aborted else None
                acquired = sp.acquire(member, batch_ranges(data, aborted), visible, max_records, lock_now, settings.limits,
                                      whole_batches=whole_batches)
                if acquired:
                    got_any = True
                    max_records -= sum(a.last - a.first + 1 for a in acquired)
                    budget -= len(data)
                    pd.records = data
                    pd.acquired_records = [_FetchPart.AcquiredRecords(first_offset=a.first, last_offset=a.last,
                                                                      delivery_count=a.delivery_count)
                                           for a in acquired]
            if pd.acquired_records or pd.error_code or (topic_id, index) in listed:
                by_topic.setdefault(topic_id, []).append(pd)
        response = ShareFetchResponse(
            error_code=0, acquisition_lock_timeout_ms=settings.limits.lock_ms, node_endpoints=[],
            responses=[ShareFetchResponse.ShareFetchableTopicResponse(topic_id=t, partitions=ps)
                       for t, ps in by_topic.items()])
        return response, got_any, waits, started

    # ---- ShareAcknowledge -----------------------------------------------------------------------

    def share_acknowledge(self, req: Request[ShareAcknowledgeRequest]) -> None:
        body = req.body
        if not body.group_id or not body.member_id:
            req.reply.set(share_acknowledge_error(req, ErrorCode.INVALID_REQUEST))
            return
        group, member = body.group_id, body.member_id
        if body.share_session_epoch == 0:
            req.reply.set(share_acknowledge_error(req, ErrorCode.INVALID_SHARE_SESSION_EPOCH))
            return
        error, session, changed = self._session(group, member, body.share_session_epoch, req.conn.conn_id)
        if session is None:
            req.reply.set(share_acknowledge_error(req, error))
            return
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                code = self._acknowledge(group, member, t.topic_id, p.partition_index, p.acknowledgement_batches,
                                         changed)
                leader = -1 if code == ErrorCode.NOT_LEADER_OR_FOLLOWER else self.node_id
                parts.append(_AckPart(partition_index=p.partition_index, error_code=code,
                                      current_leader=_AckPart.LeaderIdAndEpoch(leader_id=leader,
                                                                               leader_epoch=-1 if leader < 0 else 0)))
            topics.append(ShareAcknowledgeResponse.TopicResponse(topic_id=t.topic_id, partitions=parts))
        if body.share_session_epoch == -1:
            changed += self.service.release_member(group, member)
        response = ShareAcknowledgeResponse(error_code=0,
                                            acquisition_lock_timeout_ms=self.service.limits(group).lock_ms,
                                            responses=topics, node_endpoints=[])

        def durable(ok: bool) -> None:
            req.reply.set(response if ok else share_acknowledge_error(req, ErrorCode.UNKNOWN_SERVER_ERROR))

        self.service.persist(changed, durable)

