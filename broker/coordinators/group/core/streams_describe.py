"""StreamsGroupDescribe, and streams groups in ListGroups and DeleteGroups (Kafka 4.4's rules)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.coordinators.group.core import streams_timers as timers
from broker.coordinators.group.core import streams_topology_description as topology_description
from broker.coordinators.group.core.base.records import AnyRecord, OffsetCommitRecord
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.streams import records as rec
from broker.coordinators.group.core.streams.model import (
    MemberTaskOffsets,
    StreamsGroup,
    StreamsMember,
    TaskAssignment,
    Tasks,
)
from broker.coordinators.group.core.streams_heartbeat import configured, note_transition, remove_members
from protocol.errors import ErrorCode
from protocol.group_events import REBALANCE_TIMEOUT, SESSION_TIMEOUT, SHARD_LOADED
from protocol.messages.list_groups import ListGroupsResponse
from protocol.messages.streams_group_describe import StreamsGroupDescribeResponse

if TYPE_CHECKING:
    from broker.coordinators.group.core.state import CoordinatorState

GROUP_TYPE = "streams"
PROTOCOL_TYPE = "streams"
ASSIGNOR = "sticky"
_D = StreamsGroupDescribeResponse.DescribedGroup
_A = _D.Member.Assignment


def failed(group_id: str, code: int, message: str | None = None) -> Any:
    return _D(error_code=code, error_message=message, group_id=group_id, group_state="", group_epoch=0,
              assignment_epoch=0, members=[])


def _tasks(tasks: Tasks) -> list[Any]:
    return [_A.TaskIds(subtopology_id=s, partitions=sorted(p)) for s, p in sorted(tasks.items()) if p]


def _assignment(a: TaskAssignment) -> Any:
    return _A(active_tasks=_tasks(a.active), standby_tasks=_tasks(a.standby), warmup_tasks=_tasks(a.warmup))


def _offsets(offsets: dict[str, dict[int, int]]) -> list[Any]:
    return [_D.Member.TaskOffset(subtopology_id=s, partition=p, offset=o)
            for s, by_partition in sorted(offsets.items()) for p, o in sorted(by_partition.items())]


def _member(m: StreamsMember, target: TaskAssignment, offsets: MemberTaskOffsets) -> Any:
    endpoint = None if m.user_endpoint is None else _D.Member.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1])
    return _D.Member(member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id,
                     rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                     topology_epoch=m.topology_epoch, process_id=m.process_id, user_endpoint=endpoint,
                     client_tags=[_D.Member.KeyValue(key=k, value=v) for k, v in m.client_tags],
                     task_offsets=_offsets(offsets.offsets), task_end_offsets=_offsets(offsets.end_offsets), assignment=_assignment(m.assigned),
                     target_assignment=_assignment(target), is_classic=False)


def describe(st: CoordinatorState, group_id: str, with_description: bool = False) -> Any:
    """``with_description``: v1 asking for the topology description (KIP-1331) and its status."""
    group = st.streams.groups.get(group_id)
    if group is None:
        if group_id in st.groups or group_id in st.consumer_groups:
            return failed(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")
        return failed(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    topology = None
    if group.topology is not None:
        conf = configured(st, group)
        ready = conf is not None and not conf.statuses
        T = _D.Topology.Subtopology
        # As Kafka 4.4 describes them: the partition counts once the topology is configured, the
        # counts the topology itself gives (0: unspecified) while topics are missing.
        subs = [T(subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
                  repartition_sink_topics=list(s.repartition_sink_topics),
                  state_changelog_topics=[_info(t, conf.tasks.get(s.subtopology_id, 0) if ready and conf else
                                                t.partitions) for t in s.state_changelog_topics],
                  repartition_source_topics=[_info(t, (st.topics.partition_count(t.name) or t.partitions) if ready
                                                   else t.partitions) for t in s.repartition_source_topics])
                for s in group.topology.subtopologies]
        topology = _D.Topology(epoch=group.topology.epoch, subtopologies=subs)
    described = _D(error_code=0, error_message=None, group_id=group_id, group_state=group.state_name(),
                   group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch, topology=topology,
                   members=[_member(m, group.targets.get(mid, TaskAssignment()),
                                    group.task_offsets.get(mid, MemberTaskOffsets()))
                            for mid, m in sorted(group.members.items())],
                   assignor_name=ASSIGNOR)
    if with_description:
        topology_description.attach(st, group, described)
    return described


def _info(t: Any, partitions: int) -> Any:
    info = _D.Topology.Subtopology.TopicInfo
    return info(name=t.name, partitions=partitions, replication_factor=t.replication_factor,
                topic_configs=[info.KeyValue(key=c.key, value=c.value) for c in t.topic_configs])


def listed(st: CoordinatorState, states: set[str] | None) -> list[Any]:
    return [ListGroupsResponse.ListedGroup(group_id=g.group_id, protocol_type=PROTOCOL_TYPE,
                                           group_state=g.state_name(), group_type=GROUP_TYPE)
            for g in st.streams.groups.values() if states is None or g.state_name().lower() in states]


def deletion(group: StreamsGroup, offsets: list[tuple[str, int]]) -> tuple[int, list[AnyRecord]]:
    """Only an empty streams group is deleted: its offsets, then its records."""
    if group.members:
        return ErrorCode.NON_EMPTY_GROUP, []
    records: list[AnyRecord] = [OffsetCommitRecord(group.group_id, t, p, None) for t, p in offsets]
    records.extend(rec.group_deletion(group))
    return ErrorCode.NONE, records


def on_loaded(st: CoordinatorState, out: Result, now: int) -> None:
    """Every member gets a fresh session after a load, as Kafka does."""
    for group in st.streams.groups.values():
        if group.members:
            st.journal.note(group.group_id, SHARD_LOADED, members=len(group.members), group_epoch=group.group_epoch)
        for mid in group.members:
            timers.set_session_timeout(st, out, group.group_id, mid, now + st.config.streams_session_timeout_for(group.group_id))


def on_timer(st: CoordinatorState, kind: str, group_id: str, member_id: str, epoch: int, now: int) -> Result:
    """A session or rebalance timeout fired: the member is fenced and its tasks move."""
    out = Result()
    group = st.streams.groups.get(group_id)
    member = None if group is None else group.members.get(member_id)
    if group is None or member is None:
        return out
    if kind == timers.REBALANCE and member.member_epoch != epoch:
        return out
    before = group.state_name()
    why = "rebalance timeout" if kind == timers.REBALANCE else "session timeout"
    st.journal.note(group_id, REBALANCE_TIMEOUT if kind == timers.REBALANCE else SESSION_TIMEOUT, member_id,
                    client_id=member.client_id, instance_id=member.instance_id, process_id=member.process_id)
    for record in remove_members(st, out, group, [member_id], now):
        st.emit(out, record)
    note_transition(st, out, group_id, before, f"member {member_id} fenced: {why}")
    return out
