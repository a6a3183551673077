"""The reference broker runs and both brokers answer a first group request alike."""

from __future__ import annotations

from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.join_group import JoinGroupRequest
from tests.differential.harness import retry

pytestmark = pytest.mark.differential


def join_without_member_id(port: int) -> tuple[int, str]:
    with WireClient("127.0.0.1", port) as c:
        request = JoinGroupRequest(group_id="smoke", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                   member_id="", protocol_type="consumer",
                                   protocols=[JoinGroupRequest.Protocol(name="range", metadata=b"")])
        # FindCoordinator first: Kafka creates __consumer_offsets on the first lookup.
        retry(lambda: c.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["smoke"])),
              lambda found: found.coordinators[0].error_code == 0)
        # Kafka loads the coordinator's partition after creating the topic.
        answer = retry(lambda: c.call(11, 4, request), lambda joined: joined.error_code not in (14, 15, 16))
        return answer.error_code, answer.member_id[:6]


def test_join_without_member_id_is_answered_member_id_required(kafka: Any, broker: Any) -> None:
    assert join_without_member_id(kafka.port)[0] == join_without_member_id(broker.port)[0] == 79
