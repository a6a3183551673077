"""A consumer-protocol (KIP-848) member over the in-memory harness, and what the tests check
of a consumer group."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.coordinators.group.core import CoordinatorConfig
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from tests.unit.coordinators.group.core.harness import Harness

# No assignment interval (KIP-1263): each change is assigned in the heartbeat that brings it, as
# these tests converge members on a clock that does not move (test_assignment_interval.py covers it).
CONFIG = CoordinatorConfig(consumer_session_timeout_ms=6000, consumer_heartbeat_interval_ms=500,
                           consumer_assignment_interval_ms=0)


class Member:
    """A consumer-protocol client: sends what it owns, applies what it is given."""

    def __init__(self, h: Harness, member_id: str, group: str = "g", topics: tuple[str, ...] = ("t",),
                 instance_id: str | None = None, regex: str | None = None,
                 may_describe: Callable[[str], bool] | None = None) -> None:
        self.h, self.member_id, self.group = h, member_id, group
        self.topics, self.instance_id, self.regex = topics, instance_id, regex
        self.may_describe = may_describe  # the principal's Describe right on topics; None: no authorizer
        self.epoch = 0
        self.owned: dict[bytes, list[int]] = {}

    def beat(self, epoch: int | None = None, **fields: Any) -> Any:
        joining = self.epoch == 0 if epoch is None else epoch == 0
        req = ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch if epoch is None else epoch,
            instance_id=self.instance_id, rack_id=None,
            rebalance_timeout_ms=30_000 if joining else -1,
            subscribed_topic_names=(list(self.topics) if self.regex is None else None) if joining else None,
            subscribed_topic_regex=self.regex if joining else None,
            server_assignor=None,
            topic_partitions=[] if joining else [ConsumerGroupHeartbeatRequest.TopicPartitions(
                topic_id=t, partitions=sorted(p)) for t, p in self.owned.items()],
        )
        for name, value in fields.items():
            setattr(req, name, value)
        ctx = self.h.ctx(1)._replace(may_describe_topic=self.may_describe)
        self.h.op(self.h.shard.consumer_group_heartbeat(req, ctx, self.h.now))
        resp = self.h.response(ctx.token)
        if resp.error_code == 0 and (epoch is None or epoch >= 0):
            self.epoch = resp.member_epoch
            if resp.assignment is not None:
                self.owned = {tp.topic_id: list(tp.partitions) for tp in resp.assignment.topic_partitions}
        return resp

    def held(self) -> set[tuple[bytes, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def converge(members: list[Member], rounds: int = 10) -> None:
    for _ in range(rounds):
        for m in members:
            m.beat()
            owners: dict[tuple[bytes, int], str] = {}
            for other in members:
                for tp in other.held():
                    assert tp not in owners, f"{tp} owned by {owners[tp]} and {other.member_id}"
                    owners[tp] = other.member_id


def group_view(h: Harness, gid: str = "g") -> Any:
    g = h.shard.state.consumer_groups[gid]
    return (g.group_epoch, g.assignment_epoch, g.state.value,
            {mid: (m.member_epoch, m.state, m.assigned_partitions, m.partitions_pending_revocation,
                   m.instance_id, m.subscribed_topic_names) for mid, m in g.members.items()},
            dict(g.target_assignment))
