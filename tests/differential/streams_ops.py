"""Streams-group members (a word count's topology) as the differential tests drive them."""

from __future__ import annotations

import time
import uuid
from typing import Any

from kclient.wire_client import WireClient
from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest, StreamsGroupDescribeResponse
from protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest as Req
from protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatResponse

HB_V = 1


T = Req.Topology.Subtopology


def member_id(seed: str) -> str:
    import base64

    return base64.urlsafe_b64encode(uuid.uuid5(uuid.NAMESPACE_OID, seed).bytes).decode().rstrip("=")


def topology(app: str, source: str, epoch: int = 1) -> Any:
    repartition, changelog = f"{app}-words-repartition", f"{app}-counts-changelog"
    return Req.Topology(epoch=epoch, subtopologies=[
        T(subtopology_id="0", source_topics=[source], source_topic_regex=[], state_changelog_topics=[],
          repartition_sink_topics=[repartition], repartition_source_topics=[], copartition_groups=[]),
        T(subtopology_id="1", source_topics=[], source_topic_regex=[],
          state_changelog_topics=[T.TopicInfo(name=changelog, partitions=0, replication_factor=0,
                                              topic_configs=[T.TopicInfo.KeyValue(key="cleanup.policy",
                                                                                  value="compact")])],
          repartition_sink_topics=[], copartition_groups=[],
          repartition_source_topics=[T.TopicInfo(name=repartition, partitions=0, replication_factor=0,
                                                 topic_configs=[])]),
    ])


class Member:
    def __init__(self, c: WireClient, group: str, source: str, seed: str) -> None:
        self.c, self.group, self.source = c, group, source
        self.mid, self.process = member_id(group + seed), str(uuid.uuid5(uuid.NAMESPACE_OID, group + seed + "p"))
        self.epoch = 0
        self.active: list[Any] = []
        self.standby: list[Any] = []

    def heartbeat(self, epoch: int | None = None, **fields: object) -> StreamsGroupHeartbeatResponse:
        joining = self.epoch == 0
        tasks = [Req.TaskIds(subtopology_id=t.subtopology_id, partitions=list(t.partitions)) for t in self.active]
        standby = [Req.TaskIds(subtopology_id=t.subtopology_id, partitions=list(t.partitions)) for t in self.standby]
        request = Req(group_id=self.group, member_id=self.mid, member_epoch=self.epoch if epoch is None else epoch,
                      endpoint_information_epoch=0, rebalance_timeout_ms=30000 if joining else -1,
                      topology=topology(self.group, self.source) if joining else None,
                      active_tasks=tasks, standby_tasks=standby, warmup_tasks=[],
                      process_id=self.process if joining else None, client_tags=[] if joining else None)
        for k, v in fields.items():
            setattr(request, k, v)
        answer: StreamsGroupHeartbeatResponse = self.c.call(88, HB_V, request)
        if answer.error_code == 0 and epoch is None:
            self.epoch = answer.member_epoch
            if answer.active_tasks is not None:
                self.active = list(answer.active_tasks)
            if answer.standby_tasks is not None:
                self.standby = list(answer.standby_tasks)
        return answer


def plain(answer: StreamsGroupHeartbeatResponse) -> dict[str, Any]:
    def tasks(ids: Any) -> Any:
        return None if ids is None else {t.subtopology_id: sorted(t.partitions) for t in ids}
    return {"error_code": answer.error_code, "member_epoch": answer.member_epoch,
            "heartbeat_interval_ms": answer.heartbeat_interval_ms,
            "status": None if answer.status is None else sorted(s.status_code for s in answer.status),
            "active": tasks(answer.active_tasks), "standby": tasks(answer.standby_tasks),
            "warmup": tasks(answer.warmup_tasks)}


def describe(c: WireClient, group: str) -> Any:
    answer: StreamsGroupDescribeResponse = c.call(89, 0, StreamsGroupDescribeRequest(group_ids=[group]))
    g = answer.groups[0]
    return {"error_code": g.error_code, "state": g.group_state,
            "topology_epoch": None if g.topology is None else g.topology.epoch,
            "subtopologies": None if g.topology is None or g.topology.subtopologies is None else sorted(
                (s.subtopology_id, sorted(s.source_topics), sorted(t.name for t in s.repartition_source_topics),
                 sorted((t.name, t.partitions) for t in s.state_changelog_topics))
                for s in g.topology.subtopologies),
            "members": sorted((m.member_epoch, m.process_id, m.topology_epoch) for m in g.members)}


def until_tasks(m: Member, timeout: float = 60.0) -> dict[str, Any]:
    """Heartbeats until the member runs tasks (the broker creates the internal topics meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = plain(m.heartbeat())
        if m.active or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


