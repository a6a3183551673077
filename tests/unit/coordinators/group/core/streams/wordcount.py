"""A word count's streams group in the pure coordinator: its topology and heartbeats."""

from __future__ import annotations

from typing import Any

from broker.coordinators.group.core import CoordinatorConfig
from protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest as Req
from tests.unit.coordinators.group.core.harness import Harness

CONFIG = CoordinatorConfig(streams_session_timeout_ms=10000, streams_heartbeat_interval_ms=1000,
                           streams_initial_rebalance_delay_ms=0, streams_assignment_interval_ms=0)


APP = "wc"


REPARTITION = f"{APP}-counts-repartition"


CHANGELOG = f"{APP}-counts-changelog"


def topology(epoch: int = 1) -> Any:
    T = Req.Topology.Subtopology
    return Req.Topology(epoch=epoch, subtopologies=[
        T(subtopology_id="0", source_topics=["input"], source_topic_regex=[], state_changelog_topics=[],
          repartition_sink_topics=[REPARTITION], repartition_source_topics=[], copartition_groups=[]),
        T(subtopology_id="1", source_topics=[], source_topic_regex=[],
          state_changelog_topics=[T.TopicInfo(name=CHANGELOG, partitions=0, replication_factor=0,
                                              topic_configs=[T.TopicInfo.KeyValue(key="cleanup.policy",
                                                                                  value="compact")])],
          repartition_sink_topics=[], copartition_groups=[],
          repartition_source_topics=[T.TopicInfo(name=REPARTITION, partitions=0, replication_factor=0,
                                                 topic_configs=[])]),
    ])


def join(member: str, process: str, **kw: Any) -> Req:
    return Req(group_id=APP, member_id=member, member_epoch=0, endpoint_information_epoch=0,
               rebalance_timeout_ms=5000, topology=topology(), active_tasks=[], standby_tasks=[], warmup_tasks=[],
               process_id=process, client_tags=[], **kw)


def beat(h: Harness, member: str, epoch: int, owned: dict[str, Any] | None = None) -> Any:
    kw: dict[str, Any] = {}
    if owned is not None:
        kw = {k: [Req.TaskIds(subtopology_id=s, partitions=sorted(p)) for s, p in sorted(v.items())]
              for k, v in owned.items()}
    ctx = h.ctx(1)
    h.op(h.shard.streams_group_heartbeat(Req(group_id=APP, member_id=member, member_epoch=epoch,
                                             endpoint_information_epoch=0, **kw), ctx, h.now))
    return h.response(ctx.token)


def send(h: Harness, req: Req) -> Any:
    ctx = h.ctx(1)
    h.op(h.shard.streams_group_heartbeat(req, ctx, h.now))
    return h.response(ctx.token)


def tasks(field: Any) -> dict[str, set[int]]:
    return {t.subtopology_id: set(t.partitions) for t in field or []}


def tasks_of(t: dict[str, frozenset[int]]) -> dict[str, set[int]]:
    return {s: set(p) for s, p in t.items()}


