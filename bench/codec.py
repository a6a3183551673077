"""Codec speed: µs per decode and per encode of hot messages, fast path vs the construct reference.

    python -m bench.codec

Prints the median of several timing rounds for each case (numbers vary with machine load: compare
ratios within one run).
"""

from __future__ import annotations

import statistics
import timeit
from collections.abc import Callable
from typing import Any

from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.record_batch import build_simple_batch, decode_records, read_batch
from protocol.schema import Message


def per_call_us(fn: Callable[[], Any], rounds: int = 7) -> float:
    number = 2000
    while timeit.timeit(fn, number=number) < 0.05:
        number *= 2
    return statistics.median(timeit.timeit(fn, number=number) / number * 1e6 for _ in range(rounds))


def cases() -> list[tuple[str, Message, int, Any]]:
    commit = OffsetCommitRequest(
        group_id="payments-consumer", generation_id_or_member_epoch=7,
        member_id="rdkafka-5c1a8e0e-7e0b-4a57-9a44-8a1b2b8a0c11", group_instance_id=None,
        topics=[OffsetCommitRequest.Topic(name="payments", partitions=[
            OffsetCommitRequest.Topic.Partition(partition_index=i, committed_offset=123456 + i,
                                                committed_leader_epoch=3, committed_metadata="")
            for i in range(4)])])
    join = JoinGroupRequest(
        group_id="payments-consumer", session_timeout_ms=45000, rebalance_timeout_ms=300000,
        member_id="rdkafka-5c1a8e0e-7e0b-4a57-9a44-8a1b2b8a0c11", group_instance_id=None,
        protocol_type="consumer", reason=None,
        protocols=[JoinGroupRequest.Protocol(name="range", metadata=b"\x00\x03" + b"\x00" * 40),
                   JoinGroupRequest.Protocol(name="cooperative-sticky", metadata=b"\x00\x03" + b"\x00" * 48)])
    heartbeat = HeartbeatRequest(group_id="payments-consumer", generation_id=7,
                                 member_id="rdkafka-5c1a8e0e-7e0b-4a57-9a44-8a1b2b8a0c11", group_instance_id=None)
    return [("OffsetCommit v9 (4 partitions)", OffsetCommitRequest, 9, commit),
            ("JoinGroup v9", JoinGroupRequest, 9, join),
            ("Heartbeat v4", HeartbeatRequest, 4, heartbeat)]


def main() -> None:
    print(f"{'case':34} {'decode µs':>10} {'encode µs':>10} {'sum µs':>8} | {'construct dec':>13} {'construct enc':>13}")
    for name, msg, version, obj in cases():
        data = msg.encode(obj, version)
        ref = msg.reference(version)
        dec = per_call_us(lambda: msg.decode(data, version))  # noqa: B023
        enc = per_call_us(lambda: msg.encode(obj, version))  # noqa: B023
        rdec = per_call_us(lambda: ref.construct.parse(data), rounds=3)  # noqa: B023
        parsed = ref.construct.parse(data)
        renc = per_call_us(lambda: ref.construct.build(parsed), rounds=3)  # noqa: B023
        print(f"{name:34} {dec:10.2f} {enc:10.2f} {dec + enc:8.2f} | {rdec:13.2f} {renc:13.2f}")
    entries = [(b"\x00\x01\x00\x05group\x00\x06orders\x00\x00\x00%c" % i, b"\x00\x03" + bytes(40),
                1_700_000_000_000 + i) for i in range(100)]
    batch = build_simple_batch(entries, 1000)
    dec = per_call_us(lambda: decode_records(read_batch(batch)))
    enc = per_call_us(lambda: build_simple_batch(entries, 1000))
    print(f"{'record batch, 100 records':34} {dec:10.2f} {enc:10.2f} {dec + enc:8.2f} | "
          f"{dec / 100:.3f} µs/record decoded")


if __name__ == "__main__":
    main()
