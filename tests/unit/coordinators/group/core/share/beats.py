"""A share member's heartbeat as the share-group unit tests send it."""

from __future__ import annotations

from typing import Any

from broker.coordinators.group.core import CoordinatorConfig
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.unit.coordinators.group.core.harness import Harness

# No assignment interval (KIP-1263): each change is assigned in the heartbeat that brings it, as
# these tests run on a clock that does not move (test_share_assignment_interval.py covers it).
SHARE = CoordinatorConfig(share_assignment_interval_ms=0)


def beat(h: Harness, member: str, epoch: int, topics: list[str] | None = None, group: str = "sg") -> Any:
    ctx = h.ctx(1)
    req = ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics)
    h.op(h.shard.share_group_heartbeat(req, ctx, h.now))
    return h.response(ctx.token)
