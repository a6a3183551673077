"""What the fault runner reports beside a violation: where a duplicate's copies stand (the batch
holding an offset, read from segment files written here by kafka-python's batch builder, an
independent implementation), and why a member stopped short of the end (librdkafka's statistics,
through the pipe from the member's process to the runner)."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

from testkit.faults.checker import PartitionRead
from testkit.faults.history import History
from testkit.faults.processes import ClientProcess, LineSink, Spec
from testkit.faults.runner import batch_at, behind
from testkit.faults.workload import GroupConsumer


def batch(base_offset: int, leader_epoch: int, producer_id: int, epoch: int, sequence: int, count: int) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, producer_id, epoch, sequence, 1 << 20)
    for i in range(count):
        builder.append(i, timestamp=1_000 + i, key=None, value=b"v%d" % i, headers=[])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    struct.pack_into(">i", data, 12, leader_epoch)  # the partition leader epoch (not under the CRC)
    return bytes(data)


def test_the_batch_holding_an_offset_names_its_claim_producer_and_sequences(tmp_path: Path) -> None:
    part = tmp_path / "log-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(batch(0, 3, 1000, 0, 0, 2) + batch(2, 3, 1000, 0, 2, 3))
    (part / "00000000000000000005.log").write_bytes(batch(5, 7, 1000, 0, 2, 3))
    first = batch_at(part, 3)
    assert first.startswith("batch 2-4 at byte ") and "of 00000000000000000000.log" in first
    assert "owner epoch 3, producer 1000 epoch 0 sequences 2-4" in first
    again = batch_at(part, 6)  # the same sequences appended again, under a later claim
    assert again.startswith("batch 5-7 at byte 0 of 00000000000000000005.log: owner epoch 7, producer 1000 "
                            "epoch 0 sequences 2-4")
    assert batch_at(part, 9) == "offset 9: no batch in log-0"


class Member(ClientProcess):
    def is_alive(self) -> bool:  # a member still running, without its process
        return True


STATS = """{"brokers": {"127.0.0.1:1/2": {"nodeid": 2, "state": "UP"}},
  "topics": {"log": {"partitions": {
    "0": {"fetch_state": "validate-epoch-wait", "leader": 2, "next_offset": 40, "app_offset": 40,
          "committed_offset": 40, "hi_offset": 90, "ls_offset": 90, "consumer_lag": 50},
    "1": {"fetch_state": "active", "leader": 2, "next_offset": 10, "app_offset": 10,
          "committed_offset": 10, "hi_offset": 10, "ls_offset": 10, "consumer_lag": 0},
    "-1": {"fetch_state": "none"}}}}}"""


def test_a_member_short_of_the_end_is_reported_with_librdkafkas_view_of_the_partition() -> None:
    history = History()
    member = Member(Spec(kind="consumer", name="b-2", bootstrap="127.0.0.1:1", group="group-b", topics=["log"]),
                    history)
    pipe = io.BytesIO()
    client = GroupConsumer("b-2", LineSink(pipe), "127.0.0.1:1", "group-b", ["log"])  # the member's process
    client._on_stats(STATS)
    client.history.add("b-2", "ok", "assign", group="group-b", generation=3, assignment=[("log", 0), ("log", 1)])
    client.history.add("b-2", "ok", "position", group="group-b", offsets={"log:0": 40, "log:1": 10})
    for line in pipe.getvalue().splitlines():
        message: dict[str, Any] = json.loads(line)
        member.receive(message)
    readback = {"log:0": PartitionRead(90, {o: "v" for o in range(90)}),
                "log:1": PartitionRead(10, {o: "v" for o in range(10)})}
    text = behind(readback, [member])
    lines = text.splitlines()
    assert lines[0] == "members short of the end:" and len(lines) == 2, text
    assert lines[1].startswith("  b-2 (group-b) log:0 at 40 of 90: ")
    assert "'fetch_state': 'validate-epoch-wait'" in lines[1] and "'leader_state': 'UP'" in lines[1]
    assert [(op.f, op.assignment) for op in history.snapshot()] == [("assign", [("log", 0), ("log", 1)]),
                                                                   ("position", None)]
