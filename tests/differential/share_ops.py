"""Share-group heartbeats as the differential tests send them."""

from __future__ import annotations

import time

from kclient.wire_client import WireClient
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from tests.differential.consumer_ops import topic_names

HB_V = 1


def heartbeat(c: WireClient, group: str, mid: str, epoch: int, topics: list[str] | None = None) -> object:
    answer: ShareGroupHeartbeatResponse = c.call(76, HB_V, ShareGroupHeartbeatRequest(
        group_id=group, member_id=mid, member_epoch=epoch, subscribed_topic_names=topics))
    names = topic_names(c) if answer.assignment is not None else {}
    return {"error_code": answer.error_code, "member_id": answer.member_id, "member_epoch": answer.member_epoch,
            "heartbeat_interval_ms": answer.heartbeat_interval_ms,
            "assignment": None if answer.assignment is None else {
                names.get(t.topic_id, "?"): sorted(t.partitions) for t in answer.assignment.topic_partitions}}


def until_assigned(c: WireClient, group: str, mid: str, epoch: int) -> dict[str, object]:
    """Heartbeats until the member is given partitions: a share group assigns a partition only once
    its share state is initialized, which follows the first heartbeat that needs it."""
    deadline = time.monotonic() + 15
    while True:
        answer = heartbeat(c, group, mid, epoch)
        if answer["error_code"] or answer["assignment"] or time.monotonic() > deadline:  # type: ignore[index]
            return answer  # type: ignore[return-value]
        epoch = answer["member_epoch"]  # type: ignore[index]
        time.sleep(0.1)


