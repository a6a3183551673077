"""A classic member's assignment as the admin client describes it."""

from __future__ import annotations

from kclient.admin_client import _consumer_assignment
from protocol.payloads.consumer_protocol import ConsumerProtocolAssignment, encode_assignment


def test_the_consumer_protocols_assignment_is_read_and_other_bytes_are_no_partitions() -> None:
    TP = ConsumerProtocolAssignment.TopicPartition
    raw = encode_assignment(ConsumerProtocolAssignment(assigned_partitions=[TP(topic="orders", partitions=[0, 2])]), 0)
    assert _consumer_assignment(raw) == [("orders", 0), ("orders", 2)]
    # A member of the "consumer" protocol type that sends bytes of its own is described all the same.
    assert _consumer_assignment(b"\x07") == []
    assert _consumer_assignment(b"") == [] and _consumer_assignment(None) == []
