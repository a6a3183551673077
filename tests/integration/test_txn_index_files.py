"""A transaction aborted by a real client leaves Kafka's ``.txnindex`` beside the segment holding
its ABORT marker; after ``kill -9`` and the file's loss the broker writes it again from the log,
and read_committed consumers still skip what was aborted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from protocol.record_batch import iter_batches
from tests.integration.helpers.clients import create_topic, wait_for
from tests.integration.helpers.transactions import read_all, txn_producer

pytestmark = pytest.mark.timeout(180)


def entries(path: Path) -> list[tuple[int, int, int, int]]:
    """Kafka's layout read field by field: version int16 (0), producer id, first offset, last
    offset, last stable offset (int64 each)."""
    data = path.read_bytes()
    assert len(data) % 34 == 0
    out = []
    for i in range(0, len(data), 34):
        assert int.from_bytes(data[i:i + 2], "big") == 0
        out.append(tuple(int.from_bytes(data[i + 2 + 8 * k:i + 10 + 8 * k], "big", signed=True) for k in range(4)))
    return out  # type: ignore[return-value]


def wait_written(path: Path) -> None:
    wait_for(path.exists, 60, f"{path.name} to be written")


def test_an_aborted_transaction_is_indexed_and_the_index_survives_kill_and_loss(broker_factory: Any) -> None:
    b = broker_factory()
    bs = b.bootstrap
    create_topic(bs, "txi", 1)
    p = txn_producer(bs, "txi-txn")
    p.begin_transaction()
    for i in range(3):
        p.produce("txi", value=b"kept-%d" % i)
    p.commit_transaction(30)  # offsets 0-2, COMMIT marker at 3
    p.begin_transaction()
    for i in range(3):
        p.produce("txi", value=b"aborted-%d" % i)
    assert p.flush(30) == 0  # abort_transaction drops what librdkafka has not sent
    p.abort_transaction(30)  # offsets 4-6, ABORT marker at 7
    p.begin_transaction()
    p.produce("txi", value=b"kept-3")
    p.commit_transaction(30)  # offset 8, COMMIT marker at 9

    partition_dir = b.data_dir / "txi-0"
    index = partition_dir / "00000000000000000000.txnindex"
    wait_written(index)
    producer_id = next(batch.producer_id for batch in iter_batches((partition_dir / "00000000000000000000.log")
                                                                    .read_bytes()) if batch.base_offset == 4)
    assert entries(index) == [(producer_id, 4, 7, 8)]
    written = index.read_bytes()

    b.kill()
    index.unlink()
    b.start()
    b.wait_loaded()
    wait_written(index)
    assert index.read_bytes() == written
    assert sorted(read_all(bs, "txi")) == [b"kept-0", b"kept-1", b"kept-2", b"kept-3"]
