"""Absurd group requests get Kafka's error and leave a live group (held by a real client) undisturbed."""

from __future__ import annotations

from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.sync_group import SyncGroupRequest
from tests.integration.helpers.clients import ThreadedConsumer, create_topic, wait_for

pytestmark = pytest.mark.timeout(90)


def join(c: WireClient, version: int = 5, **fields: Any) -> Any:
    body = {"group_id": "live", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": [JoinGroupRequest.Protocol(name="range", metadata=b"")]}
    body.update(fields)
    return c.call(ApiKey.JoinGroup, version, JoinGroupRequest(**body))


def snapshot(c: WireClient) -> Any:
    g = c.call(ApiKey.DescribeGroups, 5, DescribeGroupsRequest(groups=["live"])).groups[0]
    return g.group_state, sorted((m.member_id, m.member_assignment) for m in g.members)


def test_bad_group_requests_are_refused_and_the_group_is_untouched(broker) -> None:
    create_topic(broker.bootstrap, "live-topic", 2)
    member = ThreadedConsumer(broker.bootstrap, "live", ["live-topic"])
    try:
        wait_for(lambda: len(member.held()) == 2, 30, "the real consumer to own the group")
        with WireClient("127.0.0.1", broker.port) as c:
            before = snapshot(c)
            assert before[0] == "Stable"

            assert join(c, group_id="").error_code == ErrorCode.INVALID_GROUP_ID
            assert join(c, member_id="nobody-1234").error_code == ErrorCode.UNKNOWN_MEMBER_ID
            assert join(c, group_id="never-seen", member_id="ghost").error_code == ErrorCode.UNKNOWN_MEMBER_ID
            assert join(c, session_timeout_ms=1).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
            assert join(c, session_timeout_ms=2_000_000_000).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
            assert join(c, protocol_type="connect").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            assert join(c, protocols=[JoinGroupRequest.Protocol(name="my-own-assignor", metadata=b"")]
                        ).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            hb = c.call(ApiKey.Heartbeat, 3, HeartbeatRequest(group_id="live", generation_id=999, member_id="x"))
            assert hb.error_code == ErrorCode.UNKNOWN_MEMBER_ID
            huge = c.call(ApiKey.SyncGroup, 3, SyncGroupRequest(
                group_id="live", generation_id=1, member_id="x", assignments=[
                    SyncGroupRequest.Assignment(member_id="x", assignment=b"\0" * (2 * 1024 * 1024))]))
            assert huge.error_code == ErrorCode.UNKNOWN_SERVER_ERROR

            assert snapshot(c) == before
        revocations = member.revocations
        assert member.held() == {("live-topic", 0), ("live-topic", 1)} and member.revocations == revocations
    finally:
        member.close()
