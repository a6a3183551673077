"""Where a duplicate's copies stand: the runner reads the batch holding an offset from segment
files, here written by kafka-python's batch builder (an independent implementation)."""

from __future__ import annotations

import struct
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from testkit.faults.runner import batch_at


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
